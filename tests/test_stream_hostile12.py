"""The twelfth sitting's hostile review of the streaming API: what a long-lived kernel is left
with after runs against the team store (a real SeaweedFS S3 server on 127.0.0.1)."""

from __future__ import annotations

import threading

import prefetch
from tests.test_store import MIB, objects, payload, registry


def claim_renewers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "prefetch-claims" and t.is_alive()]


def test_a_seeding_stream_leaves_no_claim_renewer_running_in_the_kernel(s3, origin, tmp_path, home):
    """Each run that seeded a file started a thread renewing its claims that looped for ever
    (and kept the run's boto3 clients alive): a notebook that streamed with seed= ten times
    kept ten. The renewer now ends once the run holds no claim."""
    assert not claim_renewers()
    for round_ in range(2):
        data = payload(MIB // 4, 1220 + round_)
        name = f"seeded-{round_}.bin"
        origin.put(name, data)
        reg = registry(tmp_path / f"r{round_}.toml", {name: (origin.url_for(name), data)}, dataset=f"toy{round_}")
        with prefetch.as_completed([f"toy{round_}"], registry=reg, seed=s3.prefix, progress=False,
                                   connections=1) as paths:
            assert [p.read_bytes() for p in paths] == [data]
        assert objects(s3, s3.prefix)[name][0] == data  # it seeded the store (so it held a claim)
    for thread in claim_renewers():
        thread.join(timeout=30)  # it may be between two renewals; then it must see nothing left to renew
    assert not claim_renewers()


def test_leaving_a_seeding_stream_stops_its_upload_too(s3, origin, tmp_path, home, monkeypatch):
    """A file placed, then seeded to the store (a multipart upload) when the loop is left:
    close() waited its 30 s for the download thread and returned with the upload still going.
    The upload now stops between parts, resumable (the next run continues it)."""
    from prefetch.fs.paths import state_dir
    from tests.slowproxy import SlowProxy

    data = payload(40 * MIB, 1230)
    origin.put("big.bin", data)
    reg = registry(tmp_path / "r.toml", {"big.bin": (origin.url_for("big.bin"), data)})
    monkeypatch.setenv("PREFETCH_S3_PART_SIZE", str(5 * MIB))
    with SlowProxy(int(s3.endpoint.rsplit(":", 1)[1]), rate=1 << 40, up_rate=1 * MIB) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)  # 40 s of upload, 5 s a part
        paths = prefetch.as_completed(["toy"], registry=reg, seed=s3.prefix, progress=False, connections=1)
        records = state_dir() / "push"
        while not (records.is_dir() and any(records.glob("*.json"))):  # the upload has started
            assert paths._thread.is_alive()
            threading.Event().wait(0.05)
        paths.close()
        assert not paths._thread.is_alive()  # close() saw the run end, not its 30 s join timeout
        assert "big.bin" not in objects(s3, s3.prefix)  # nothing half-made is visible
        assert (home / ".keras" / "datasets" / "big.bin").read_bytes() == data

        # The next run (the same endpoint, fast now) continues the upload it left.
        proxy.up_rate = None
        events = []
        with prefetch.as_completed(["toy"], registry=reg, seed=s3.prefix, progress=False,
                                   on_event=events.append) as again:
            assert [p.name for p in again] == ["big.bin"]
    assert objects(s3, s3.prefix)["big.bin"][0] == data
    assert any("seeded the store: resumed" in (e.message or "") for e in events), [e.message for e in events]
