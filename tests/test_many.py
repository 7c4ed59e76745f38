"""Many files at once (#19): one scheduler across files, one connection budget per host,
keep-alive connections passed from file to file, one request per small file.

Counted on the server's side: a real nginx logs the TCP connection (``$connection``) that
served each request, and its ``limit_conn`` answers 503 to connections beyond a cap.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import time
from pathlib import Path

from tests.helpers import start_cli
from tests.nginx import NginxServer


def _files(root: Path, count: int, size: int, *, prefix: str = "f") -> dict[str, bytes]:
    files = {}
    for i in range(count):
        name = f"{prefix}{i:04d}.bin"
        data = hashlib.sha256(f"{name}".encode()).digest() * (size // 32) + os.urandom(size % 32)
        (root / name).write_bytes(data)
        files[name] = data
    return files


def _list(path: Path, server: NginxServer, files: dict[str, bytes]) -> Path:
    path.write_text("".join(f"{server.url_for(n)} sha256={hashlib.sha256(d).hexdigest()}\n"
                            for n, d in files.items()))
    return path


def _max_overlap(spans: list[tuple[float, float]]) -> int:
    """Most intervals open at once (an end at the same instant as a start does not overlap it)."""
    points = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda p: (p[0], p[1]))
    best = now = 0
    for _, step in points:
        now += step
        best = max(best, now)
    return best


def _check_placed(out: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    assert not [p for p in out.iterdir() if p.name not in files], "nothing but the files is left"


def test_hundreds_of_files_share_a_connection_budget_and_keep_alive(home, tmp_path, cli):
    """300 small files from nginx: all verified, at most --host-connections requests at once
    and at most that many TCP connections in all (each kept alive from file to file), one
    request per file (no probe), and nginx's limit_conn at the budget never had to refuse."""
    root = tmp_path / "www"
    root.mkdir()
    files = _files(root, 300, 8 << 10)
    budget = 6
    with NginxServer(root, limit_conn=budget) as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "--host-connections", str(budget), "-q")
        assert proc.returncode == 0, proc.stderr
        _check_placed(out, files)
        log = server.requests()
    assert [r for r in log if r[4] != 200 and r[4] != 206] == [], "no refusal, no error"
    assert len(log) == len(files), "one request per small file: no separate probe"
    assert sorted(r[6].split()[1].lstrip("/") for r in log) == sorted(files)
    connections = {r[0] for r in log}
    assert len(connections) <= budget, f"{len(connections)} TCP connections for a budget of {budget}"
    assert max(r[1] for r in log) > 10, "connections carried many requests (keep-alive across files)"
    assert _max_overlap([(r[2], r[3]) for r in log]) <= budget
