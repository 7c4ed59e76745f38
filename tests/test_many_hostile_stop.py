"""Stopping a list of hundreds (#19): --fail-fast at a 404 and Ctrl-C. Every file stops
within a second with the documented exit code and nothing half-placed; the error output is
the failure itself, a few of the files the stop caught, and one line counting the rest
(before: a `prefetch: error:` line per file, 250 of them for one 404)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time

from tests.helpers import start_cli
from tests.origin import OriginServer

FILES = 300


def _serve(origin: OriginServer) -> dict[str, bytes]:
    files = {}
    for i in range(FILES):
        name = f"f{i:04d}.bin"
        files[name] = hashlib.sha256(name.encode()).digest() * 300
        origin.put(name, files[name])
    return files


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error: ")]


def _check_placed(out, files) -> int:
    placed = 0
    for path in out.iterdir() if out.exists() else []:
        if path.name in files:
            assert path.read_bytes() == files[path.name], path  # a final name holds a complete file
            placed += 1
    return placed


def test_fail_fast_in_a_list_of_hundreds_says_the_failure_and_counts_the_rest(home, tmp_path, cli):
    with OriginServer() as origin:
        files = _serve(origin)
        listing = tmp_path / "urls.txt"
        names = list(files)
        listing.write_text("".join(f"{origin.url_for(n if i != 40 else 'missing.bin')}\n"
                                   for i, n in enumerate(names)))
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "--fail-fast", "--host-connections", "4", "-q")
    assert proc.returncode == 3, proc.stderr
    errors = _errors(proc.stderr)
    assert "404" in errors[0], errors[:3]
    assert len(errors) <= 5, f"{len(errors)} error lines:\n" + "\n".join(errors[:10])
    assert "more files" in errors[-1] and "run the same command again" in errors[-1], errors
    placed = _check_placed(out, files)
    assert placed < FILES - 1
    count = int(errors[-1].split(" more files")[0].rsplit(" ", 1)[-1])
    assert placed + count + len(errors) - 1 == FILES, (placed, count, errors)


def test_ctrl_c_in_a_list_of_hundreds_counts_the_files_it_stopped(home, tmp_path):
    with OriginServer() as origin:
        files = _serve(origin)
        origin.total_rate = 200_000  # bytes/s: the list takes ~15 s, so the Ctrl-C finds most of it to do
        listing = tmp_path / "urls.txt"
        listing.write_text("".join(f"{origin.url_for(n)}\n" for n in files))
        out = tmp_path / "out"
        proc = start_cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "2", "--plain",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while _check_placed(out, files) < 5 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 7, err
    errors = _errors(err)
    assert len(errors) <= 4, f"{len(errors)} error lines:\n" + "\n".join(errors[:10])
    assert "more files" in errors[-1], errors
    assert not [p for p in out.iterdir() if p.name not in files and not p.name.endswith((".part", ".part.json"))]
