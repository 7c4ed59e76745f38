"""The CLI's ``--timeout`` reaches the team store's client, as ``PREFETCH_*TIMEOUT`` already did:
its read share (half of it) is how long the store's client waits for an answer, not the 15 s
default of ``PREFETCH_READ_TIMEOUT``."""

from __future__ import annotations

import os

from tests.conftest import run_cli
from tests.test_store import MIB, payload, registry
from tests.test_store_mend12_hung import _FakeS3

ANSWER_AFTER = 4.0  # seconds: past --timeout 1's read share (0.5 s), well within the default 15 s


class StoreSlowToAnswer(_FakeS3):
    """Every request answered ``ANSWER_AFTER`` seconds after it arrived (objects absent: HEAD
    404, the rest 200): a client waiting 15 s gets each answer; one waiting 0.5 s none."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        super().__init__()

    def answer(self, request) -> None:
        self.asked.append(request.command)
        self.release.wait(ANSWER_AFTER)
        self.reply(request, 404 if request.command == "HEAD" else 200)


def test_the_cli_timeout_reaches_the_team_store_client(origin, tmp_path, home):
    data = payload(MIB // 4, 1313)
    origin.put("f.bin", data)
    reg = registry(tmp_path / "r.toml", {"f.bin": (origin.url_for("f.bin"), data)})
    store = StoreSlowToAnswer()
    env = dict(os.environ, AWS_ENDPOINT_URL=store.url, AWS_ACCESS_KEY_ID="mend13", AWS_SECRET_ACCESS_KEY="mend13-s",
               AWS_REGION="us-east-1")
    for var in ("PREFETCH_TIMEOUT", "PREFETCH_READ_TIMEOUT", "PREFETCH_CONNECT_TIMEOUT"):
        env.pop(var, None)  # (each would win over --timeout's read share)
    try:
        done = run_cli("get", "toy", "--registry", reg, "--seed", "s3://team/slow/", "--timeout", "1",
                       env=env, timeout=300)
    finally:
        store.close()
    assert done.returncode == 0, done.stderr
    assert (home / ".keras" / "datasets" / "f.bin").read_bytes() == data  # (from the origin)
    # The store's HEAD went unanswered within 0.5 s: said once, the origin used, no claim taken.
    assert "store: HEAD s3://team/slow/f.bin: Read timeout on endpoint URL" in done.stderr, done.stderr
    assert set(store.asked) == {"HEAD"}, store.asked
