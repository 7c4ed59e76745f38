"""A claim's renewal still under way when the file's claim is released: the store applies the
renewal's PUT after the release's DELETE (sent before it, answered after it), and the claim was
back on the store, ours, alive for a whole lease: another machine's seeder waited it out. Now
the renewer, finding the claim released once its PUT returns, deletes it again."""

from __future__ import annotations

import threading

import prefetch
from tests.test_store import MIB, payload, registry
from tests.test_store_mend12_hung import _FakeS3, _store_env


class StoreThatRenewsLate(_FakeS3):
    """Claims kept as a set of keys; the first renewal (a claim PUT without If-None-Match) is
    applied only after the next DELETE of a claim; objects are absent (HEAD 404), uploads taken."""

    def __init__(self) -> None:
        self.present: set[str] = set()
        self.renewing = threading.Event()
        self.deleted = threading.Event()
        self.held = False
        self.lock = threading.Lock()
        super().__init__()

    def answer(self, request) -> None:
        path = request.path.split("?")[0]
        if ".prefetch-claims/" in path and request.command == "PUT":
            if request.headers.get("If-None-Match") is None and not self.held:
                self.held = True
                self.renewing.set()
                self.deleted.wait(60)  # (the release's DELETE is answered first)
            with self.lock:
                self.present.add(path)
            self.reply(request, 200)
            return
        if ".prefetch-claims/" in path and request.command == "DELETE":
            with self.lock:
                self.present.discard(path)
            self.deleted.set()
            self.reply(request, 204, etag=False)
            return
        self.reply(request, 404 if request.command == "HEAD" else 200)


def test_a_claim_released_while_its_renewal_is_under_way_is_not_left_behind(origin, tmp_path, home, monkeypatch):
    data = payload(MIB, 1313)
    origin.put("f.bin", data)
    origin.rate = 400_000  # (~2.6 s: the renewer, every 0.5 s with a 2 s lease, renews during it)
    reg = registry(tmp_path / "r.toml", {"f.bin": (origin.url_for("f.bin"), data)})
    store = StoreThatRenewsLate()
    monkeypatch.setenv("PREFETCH_SEED_LEASE", "2")
    try:
        _store_env(monkeypatch, store)
        monkeypatch.setenv("PREFETCH_READ_TIMEOUT", "30")
        done = list(prefetch.as_completed(["toy"], registry=reg, seed="s3://team/late/", progress=False))
        assert len(done) == 1
        assert store.renewing.is_set() and store.deleted.is_set()
        for thread in [t for t in threading.enumerate() if t.name == "prefetch-claims"]:
            thread.join(timeout=60)  # (the renewal answered after the release; the renewer then ends)
        with store.lock:
            assert store.present == set(), store.present
    finally:
        store.close()
    assert (home / ".keras" / "datasets" / "f.bin").read_bytes() == data
