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
