"""The bulk lane against the usual path, side by side: the same list, the same hostile origin,
``PREFETCH_BULK=1`` and ``=0``; the outcomes must be equal (exit code, the files placed and their
bytes, every output line but times and rates, and what a rerun does), only speed may differ.

``differ(cli, tmp_path, tricks)`` runs both and returns what differs (empty: nothing); each run
also reports whether the lane met the trick (its range asked for that file).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket

import pytest

from tests.bulk_origin import BulkOrigin

COUNT = 48
TRICKED = "f040.bin"  # (late enough in the list that the host is near and its chunk is the lane's)


class HostileOrigin(BulkOrigin):
    """``BulkOrigin`` with answers the lane's strict reader must judge as the usual path's reader does."""

    def _answer(self, conn: socket.socket, name: str, ranged: bool) -> bool:
        trick = self.tricks.get(name)
        if trick not in _HEADS:
            return super()._answer(conn, name, ranged)
        with self._lock:
            self.asked[name] += 1
        data = self.files[name]
        head = [b"HTTP/1.1 206 Partial Content", b"Content-Type: application/octet-stream",
                b"Content-Length: %d" % len(data), b'ETag: "v1"',
                b"Content-Range: bytes 0-%d/%d" % (len(data) - 1, len(data)), *_HEADS[trick]]
        conn.sendall(b"\r\n".join(head) + b"\r\n\r\n" + data)
        return True


# Extra header lines; http.client (the usual path's reader) allows lines of up to 65536 bytes with
# their CRLF and up to 99 header lines (100 with the blank one).
_HEADS = {
    "lines-99": [b"X-H%d: v" % i for i in range(95)],
    "lines-100": [b"X-H%d: v" % i for i in range(96)],
    "line-65536": [b"X-Big: " + b"a" * (65536 - 9)],
    "line-65537": [b"X-Big: " + b"a" * (65536 - 8)],
}

_RATE = re.compile(r" in [0-9.]+s, avg [0-9.]+ ?[KMGT]?i?B/s")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\S+ ")


def _lines(text: str, origin: BulkOrigin, out) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = _STAMP.sub("", line).replace(str(out), "OUT")
        line = re.sub(r"127\.0\.0\.1:\d+", "HOST", _RATE.sub(" in T", line))
        lines.append(re.sub(r"retry (\d+)/(\d+) in [0-9.]+s", r"retry \1/\2", line))
    return sorted(lines)


def _outcome(cli, tmp_path, tricks: dict, *, bulk: bool, files: dict[str, bytes]) -> tuple:
    tag = "lane" if bulk else "usual"
    out, home = tmp_path / f"out-{tag}", tmp_path / f"home-{tag}"
    env = {**os.environ, "PREFETCH_BULK": "1" if bulk else "0", "PREFETCH_HOME": str(home)}
    runs = []
    with HostileOrigin(files, tricks) as origin:
        listing = tmp_path / f"list-{tag}.txt"
        listing.write_text("".join(f"{origin.url_for(name)}\n" for name in files))
        for _ in range(2):  # the run, then a rerun
            proc = cli("get", "-i", str(listing), "-P", str(out), "--plain", "--retries", "1", env=env)
            runs.append((proc.returncode, _lines(proc.stdout, origin, out), _lines(proc.stderr, origin, out)))
        met = {name: origin.lane(name) > 0 for name in tricks}
    placed = {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
              for p in sorted(out.rglob("*")) if p.is_file()}
    return runs, placed, met


def differ(cli, tmp_path, tricks: dict, *, count: int = COUNT) -> tuple[list[str], dict]:
    """What differs between the lane's outcome and the usual path's (empty: nothing), and which
    tricked files the lane asked for."""
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 512 for i in range(count)}
    lane_runs, lane_placed, met = _outcome(cli, tmp_path, tricks, bulk=True, files=files)
    usual_runs, usual_placed, _ = _outcome(cli, tmp_path, tricks, bulk=False, files=files)
    diffs = []
    for number, (lane, usual) in enumerate(zip(lane_runs, usual_runs)):
        for what, a, b in zip(("exit code", "stdout", "stderr"), lane, usual):
            if a != b:
                only = (sorted(set(a) - set(b))[:3], sorted(set(b) - set(a))[:3]) if what != "exit code" else (a, b)
                diffs.append(f"run {number + 1} {what}: lane {only[0]} usual {only[1]}")
    if lane_placed != usual_placed:
        diffs.append(f"placed: lane {sorted(set(lane_placed.items()) - set(usual_placed.items()))[:3]} "
                     f"usual {sorted(set(usual_placed.items()) - set(lane_placed.items()))[:3]}")
    return diffs, met


@pytest.mark.parametrize("trick", ["lines-100", "line-65537", "lines-99", "line-65536"])
def test_a_head_past_http_clients_limits_is_refused_as_the_usual_path_refuses_it(home, tmp_path, cli, trick):
    """A head of 100 header lines, or with a line of 65537 bytes, is refused by the usual path's
    reader (http.client: the file fails after its retries, exit 3); the lane read it whole and
    placed the file (exit 0). At 99 lines and 65536 bytes both take it."""
    diffs, met = differ(cli, tmp_path, {TRICKED: trick})
    assert met[TRICKED], "the lane asked for the tricked file"
    assert not diffs, diffs
