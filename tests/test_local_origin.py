"""Local origins (issue 21, item 1): ``file://`` URLs and plain paths wherever a URL works.

A notebook's OSS or NAS mount is a directory of files: ``prefetch get /mnt/data/x.tar.gz``
copies it with the guarantees of any download (verified, placed atomically, resumable,
a changed source copied again rather than stitched). Every test runs the real CLI (or
the Python API) on real files; no server is involved.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import tarfile
import time
from pathlib import Path

import prefetch
from prefetch.errors import HashMismatchError
from tests.conftest import run_cli
from tests.test_faults_kill import Running, wait_until
from tests.test_jobs import job_id_from

KiB, MiB = 1 << 10, 1 << 20


def blob(seed: int, size: int = 300 * KiB) -> bytes:
    return random.Random(seed).randbytes(size)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def errors_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def test_paths_and_file_urls_on_the_command_line_and_in_input_files(home, tmp_path):
    mount = tmp_path / "mnt data"  # a space: file:// URLs carry it as %20
    mount.mkdir()
    a, b, c, d = blob(1), blob(2), blob(3), blob(4)
    (mount / "a.bin").write_bytes(a)
    (mount / "b c.bin").write_bytes(b)
    (mount / "c.bin").write_bytes(c)
    (mount / "d.bin").write_bytes(d)
    out = tmp_path / "out"

    # An absolute path, a file:// URL with a fragment hash, a path relative to the current directory.
    proc = run_cli("get", str(mount / "a.bin"), (mount / "b c.bin").as_uri() + f"#sha256={sha(b)}",
                   "mnt data/c.bin", "-P", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "a.bin").read_bytes() == a
    assert (out / "b c.bin").read_bytes() == b  # named as the file is, not as its URL is quoted
    assert (out / "c.bin").read_bytes() == c
    assert sorted(p.name for p in out.iterdir()) == ["a.bin", "b c.bin", "c.bin"]  # no .part, no state

    # -i: a file:// URL and explicit paths, each with its own options (words are split at
    # spaces, so a path with a space is written as a file:// URL).
    nas = tmp_path / "nas"
    nas.mkdir()
    (nas / "d.bin").write_bytes(d)
    (nas / "c.bin").write_bytes(c)
    listing = "\n".join([
        f"{(mount / 'a.bin').as_uri()} sha256={sha(a)} out=one.bin",
        f"{nas / 'd.bin'}",
        f"  out=sub/two.bin",
        f"./nas/c.bin#sha256={sha(c)}",
    ]) + "\n"
    proc = run_cli("get", "-i", "-", "-P", str(tmp_path / "list"), input=listing, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "list" / "one.bin").read_bytes() == a
    assert (tmp_path / "list" / "sub" / "two.bin").read_bytes() == d
    assert (tmp_path / "list" / "c.bin").read_bytes() == c

    # -o with --sha256, as for an http URL; a wrong hash leaves nothing at the final path.
    proc = run_cli("get", str(mount / "d.bin"), "-o", str(tmp_path / "x.bin"), "--sha256", sha(a))
    assert proc.returncode == 4, proc.stderr
    assert len(errors_of(proc.stderr)) == 1 and "mismatch" in proc.stderr, proc.stderr
    assert not (tmp_path / "x.bin").exists()


def test_bad_local_origins_are_one_line_and_exit_2(home, tmp_path):
    os.mkfifo(tmp_path / "fifo.bin")
    (tmp_path / "dir").mkdir()
    for name, expected in ((str(tmp_path / "missing.bin"), "no such file"),
                           ("./missing.bin", "no such file"),
                           (str(tmp_path / "dir"), "not a regular file"),
                           (str(tmp_path / "fifo.bin"), "not a regular file"),  # never blocks on a FIFO
                           ("file://elsewhere/x.bin", "names a local file"),
                           ("file:relative.bin", "absolute path")):
        proc = run_cli("get", name, "-P", str(tmp_path / "out"), cwd=tmp_path, timeout=60)
        assert proc.returncode == 2, (name, proc.stderr)
        assert len(errors_of(proc.stderr)) == 1 and expected in proc.stderr, (name, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_an_interrupted_local_copy_resumes_and_a_changed_source_is_copied_again(home, tmp_path):
    source = tmp_path / "mount" / "big.bin"
    source.parent.mkdir()
    first = blob(7, 6 * MiB)
    source.write_bytes(first)
    out = tmp_path / "out" / "big.bin"
    part, state = Path(f"{out}.part"), Path(f"{out}.part.json")

    def copied() -> int:
        try:
            return sum(end - start for start, end in json.loads(state.read_text())["done"])
        except (OSError, ValueError, KeyError):
            return 0

    def interrupted_copy() -> int:
        run = Running("get", str(source), "-o", str(out), "--limit-rate", "1M", "--connections", "1")
        wait_until(lambda: copied() >= MiB, what="a first MiB copied")
        assert run.kill() < 0 and not out.exists()
        return copied()

    # 1. SIGKILL midway; the same command continues from the bytes on disk.
    kept = interrupted_copy()
    proc = run_cli("get", str(source), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "resuming:" in proc.stderr, proc.stderr
    assert out.read_bytes() == first and not part.exists() and not state.exists()
    assert kept >= MiB

    # 2. The source changes between the two runs (same size, other bytes): copied again from 0, never stitched.
    out.unlink()
    interrupted_copy()
    second = blob(8, 6 * MiB)
    source.write_bytes(second)
    os.utime(source, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))  # a coarse-mtime mount still differs
    proc = run_cli("get", str(source), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "changed" in proc.stderr, proc.stderr
    assert out.read_bytes() == second


def test_a_local_archive_as_a_background_job_is_extracted_where_the_foreground_would(home, tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("pack/a.txt", b"alpha"), ("pack/b.txt", b"beta")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = buf.getvalue()
    (tmp_path / "mnt").mkdir()
    (tmp_path / "mnt" / "pack.tar.gz").write_bytes(archive)
    work = tmp_path / "work"
    work.mkdir()

    proc = run_cli("get", "../mnt/pack.tar.gz", "--sha256", sha(archive), "--extract", "-b", cwd=work)
    assert proc.returncode == 0, proc.stderr
    job = job_id_from(proc.stdout + proc.stderr)
    waited = run_cli("wait", job, "--timeout", "60")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (work / "pack.tar.gz").read_bytes() == archive  # the worker runs elsewhere: the path was pinned
    assert (work / "pack" / "a.txt").read_bytes() == b"alpha"
    status = json.loads(run_cli("status", job, "--json").stdout)
    assert (tmp_path / "mnt" / "pack.tar.gz").as_uri() in json.dumps(status)


def test_python_api_fetch_takes_file_urls_and_paths(home, tmp_path):
    data = blob(9)
    (tmp_path / "w.bin").write_bytes(data)

    path = prefetch.fetch((tmp_path / "w.bin").as_uri(), sha256=sha(data), path=tmp_path / "a")
    assert path == tmp_path / "a" / "w.bin" and path.read_bytes() == data
    path = prefetch.fetch(str(tmp_path / "w.bin"), path=tmp_path / "b")
    assert path == tmp_path / "b" / "w.bin" and path.read_bytes() == data
    try:
        prefetch.fetch((tmp_path / "w.bin").as_uri(), sha256="0" * 64, path=tmp_path / "c")
    except HashMismatchError:
        pass
    else:
        raise AssertionError("a wrong hash passed")
    assert not (tmp_path / "c" / "w.bin").exists()
