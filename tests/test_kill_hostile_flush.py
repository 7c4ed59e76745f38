"""After a machine crash (a VM preempted), a name prefetch placed holds its bytes.

A download's ``.part`` is flushed before its rename. What an archive extracts and what a
``.gz`` decompresses to are placed by a rename too, and Keras (the archive beside its
folders) and torchvision (``MNIST/raw/train-images-idx3-ubyte`` exists: done) take the name as
complete, so their bytes must be on disk before that rename: a ``syncfs`` (or ``sync``) of the
extracted tree, an ``fdatasync`` of the decompressed file. A crash cannot be staged in a test;
the order of the calls can, traced by strace around the real CLI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import torchvision_synth as synth
from tests.archives import tar_gz


def _strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    return subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "true"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _strace_works(), reason="needs strace (and ptrace)")


def _traced_get(tmp_path: Path, *args: str) -> list[str]:
    trace = tmp_path / "trace"
    done = subprocess.run(["strace", "-f", "-qq", "-y", "-o", str(trace),
                           "-e", "trace=syncfs,sync,fdatasync,fsync,rename,renameat,renameat2",
                           sys.executable, "-m", "prefetch", "get", *args],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    return trace.read_text().splitlines()


def _first(lines: list[str], pattern: str) -> int:
    found = [i for i, line in enumerate(lines) if re.search(pattern, line)]
    assert found, f"no {pattern!r} in the trace:\n" + "\n".join(lines)
    return found[0]


def test_an_extracted_tree_is_flushed_before_it_is_placed(home, tmp_path, nginx_origin):
    members = {f"top{i}/f{j}.txt": os.urandom(3000) for i in range(3) for j in range(4)}
    (nginx_origin.root / "a.tar.gz").write_bytes(tar_gz(members))
    out = tmp_path / "out"
    lines = _traced_get(tmp_path, nginx_origin.url_for("a.tar.gz"), "--extract", "-P", str(out))
    for name, data in members.items():
        assert (out / name).read_bytes() == data
    placed = _first(lines, r"rename[a-z0-9]*\(.*\.out\.extract-[^\"]*/top0\"")  # the first entry moved into out/
    flushed = [i for i, line in enumerate(lines) if re.search(r"\b(syncfs\(\d+</[^>]*\.out\.extract-|sync\(\))", line)]
    assert flushed and flushed[0] < placed, "\n".join(lines)


def test_a_decompressed_file_is_flushed_before_it_is_placed(home, tmp_path, nginx_origin):
    registry = tmp_path / "mnist.toml"
    synth.served_mnist(nginx_origin.root, registry, 1)
    root = tmp_path / "data"
    lines = _traced_get(tmp_path, "torchvision:MNIST", "--root", str(root), "--registry", str(registry),
                        "--mirror", nginx_origin.url)
    raw = root / "MNIST" / "raw"
    assert (raw / "train-labels-idx1-ubyte").stat().st_size > 0
    placed = _first(lines, r"rename[a-z0-9]*\(.*\"\.train-labels-idx1-ubyte\.\d+-[0-9a-f]+\.tmp\"")
    flushed = [i for i, line in enumerate(lines)
               if re.search(r"f(data)?sync\(\d+</[^>]*/\.train-labels-idx1-ubyte\.\d+-[0-9a-f]+\.tmp>", line)]
    assert flushed and flushed[0] < placed, "\n".join(lines)
