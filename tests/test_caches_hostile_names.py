"""Two files of one get where one's final name is the other's in-flight name.

prefetch downloads ``X`` into ``X.part`` (state ``X.part.json``) beside it. Asked for ``X``
and ``X.part`` into one folder, it placed ``X.part``, then ``X``'s download took it for its
partial: ``X.part`` was reported "downloaded" and then deleted, and ``X`` failed. Refused
before anything starts now (ms:// repos: tests/test_caches_hostile_ms.py).
"""

from __future__ import annotations

import os

import pytest


@pytest.mark.parametrize("suffix", [".part", ".part.json"])
def test_a_file_named_like_anothers_partial_is_refused_before_anything_starts(cli, home, origin, tmp_path, suffix):
    origin.put("w.bin", os.urandom(300_000))
    origin.put("w.bin" + suffix, b"a file of its own\n")
    out = tmp_path / "out"
    proc = cli("get", origin.url_for("w.bin" + suffix), origin.url_for("w.bin"), "-P", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and f"w.bin{suffix}" in proc.stderr, proc.stderr
    assert not origin.requests or all(r.method != "GET" for r in origin.requests)
    # One at a time into separate folders works, as the message says.
    for name, where in (("w.bin" + suffix, out / "a"), ("w.bin", out / "b")):
        done = cli("get", origin.url_for(name), "-P", str(where))
        assert done.returncode == 0, done.stderr
    assert (out / "a" / ("w.bin" + suffix)).read_bytes() == b"a file of its own\n"
