"""``prefetch demo``, the README's first command: the whole flow offline, as a user runs it.

It runs the real CLI in a fresh home with every proxy variable pointing nowhere (the demo
needs no network), keeps its temporary Keras cache, and checks what a user is told against
what is on disk: the interrupted first pass, a resume that re-sends only part of the
archive, the third pass that downloads nothing, and every file byte for byte.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tarfile
from pathlib import Path

from prefetch.demo.run import ARCHIVE, PLAIN, make_demo_files


def test_prefetch_demo_interrupts_resumes_verifies_and_extracts(cli, home):
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               NO_PROXY="127.0.0.1,localhost")  # nothing may leave the machine (loopback is exempt)
    result = cli("demo", "--keep", env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "demo ok: every file verified and in place" in out
    root = Path(re.search(r"^kept (\S+)$", out, re.M).group(1))
    try:
        steps = dict(re.findall(r"^([123])\. (.+)$", out, re.M))
        assert f"{ARCHIVE}: interrupted" in steps["1"], steps
        assert f"{ARCHIVE}: downloaded" in steps["2"] and f"{PLAIN}: cached" in steps["2"], steps
        assert steps["3"] == f"{ARCHIVE}: cached, {PLAIN}: cached" or \
            sorted(steps["3"].split(", ")) == sorted([f"{ARCHIVE}: cached", f"{PLAIN}: cached"]), steps

        files = make_demo_files()
        served = re.search(r"resume re-sent ([\d.]+)(KiB|MiB|B)\)", out)
        resent = float(served.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}[served.group(2)]
        assert resent < len(files[ARCHIVE]) / 2, out  # the resume kept the bytes on disk

        datasets = root / "datasets"
        assert hashlib.sha256((datasets / PLAIN).read_bytes()).digest() == hashlib.sha256(files[PLAIN]).digest()
        # The archive's gzip header holds the time it was made: compare what it holds.
        with tarfile.open(fileobj=io.BytesIO(files[ARCHIVE])) as tar:
            members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        assert members
        with tarfile.open(datasets / ARCHIVE) as tar:
            assert {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()} == members
        for name, want in members.items():
            assert (datasets / name).read_bytes() == want
            assert (datasets / "demo-batches-py-target" / name).read_bytes() == want
        assert not list(datasets.rglob("*.part")), "no partial left beside a placed file"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_prefetch_demo_without_keep_leaves_no_cache_behind(cli, home, tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    result = cli("demo", env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "demo ok" in result.stdout
    assert list((tmp_path / "tmp").iterdir()) == []  # its temporary Keras cache is gone
