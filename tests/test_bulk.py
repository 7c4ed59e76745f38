"""The bulk lane for many small files from a near host (issue 19's loopback row): a real nginx
counts what the lane did. Its requests ask ``Range: bytes=0-262143`` (the lane's one answer of at
most ``INLINE_BODY``; the usual path asks for its first 1 MiB window), so nginx's log of
``$http_range`` and ``$connection`` shows which files came through it and on how many TCP
connections."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.nginx import NginxServer
from tests.test_many import assert_job_reports_each_file, run_list_job

LANE_RANGE = "bytes=0-262143"


def _files(root: Path, count: int, size: int) -> dict[str, bytes]:
    root.mkdir()
    files = {}
    for i in range(count):
        name = f"f{i:04d}.bin"
        files[name] = hashlib.sha256(name.encode()).digest() * (size // 32)
        (root / name).write_bytes(files[name])
    return files


def _list(path: Path, server: NginxServer, files: dict[str, bytes], *, hashes: bool = True) -> Path:
    path.write_text("".join(f"{server.url_for(n)}{' sha256=' + hashlib.sha256(d).hexdigest() if hashes else ''}\n"
                            for n, d in files.items()))
    return path


def _check(out: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    assert sorted(p.name for p in out.iterdir()) == sorted(files), "nothing but the files is left"


def assert_through_the_lane(server: NginxServer, files: dict[str, bytes], *, connections: int) -> None:
    """nginx's logs: one request per file, most of them the lane's (its Range), on at most
    ``connections`` TCP connections ($connection), one of which carried many requests."""
    served, requests = server.served(), server.requests()
    assert len(served) == len(files), "one request per file"
    lane = [r for r in served if r[3] == LANE_RANGE]
    assert len(lane) >= len(files) * 3 // 4, f"only {len(lane)} of {len(files)} files came through the lane"
    opened = {r[0] for r in requests}
    assert len(opened) <= connections, f"{len(opened)} TCP connections for {len(files)} files"
    assert max(r[1] for r in requests) >= 100, "a connection carried many of the lane's requests"


def test_a_list_of_hundreds_goes_through_the_lane_on_few_connections(home, tmp_path, cli):
    """400 files of 16 KiB: all byte-exact, most of them through the lane (its Range), all on a
    handful of kept-alive TCP connections (nginx's $connection), one request per file."""
    files = _files(tmp_path / "www", 400, 16 << 10)
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
        assert proc.returncode == 0, proc.stderr
        _check(out, files)
        assert_through_the_lane(server, files, connections=40)


def test_without_the_lane_the_same_list_takes_the_usual_path(home, tmp_path, cli):
    """``PREFETCH_BULK=0``: no request of the lane's shape (the A/B switch works)."""
    files = _files(tmp_path / "www", 40, 4 << 10)
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q", env={**os.environ, "PREFETCH_BULK": "0"})
        assert proc.returncode == 0, proc.stderr
        _check(out, files)
        assert not [r for r in server.served() if r[3] == LANE_RANGE]


def test_a_background_list_through_the_lane_keeps_status_and_one_log_line_per_file(home, tmp_path, cli):
    """A `-b` job of 200 files (no hashes), some through the lane: `status` counts 200/200 files,
    `status --files` has a row per file, the log one line per finished file."""
    files = _files(tmp_path / "www", 200, 8 << 10)
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files, hashes=False)
        out = tmp_path / "out"
        job = run_list_job(cli, listing, out)
        _check(out, files)
        lane = [r for r in server.served() if r[3] == LANE_RANGE]
    # (How many the lane takes depends on the route judgement and the lane's pace, which a loaded
    # machine moves: the promise is that the files it took are reported as the others are.)
    assert len(lane) >= 2, f"only {len(lane)} of {len(files)} files came through the lane"
    assert_job_reports_each_file(cli, job, files)


def test_a_file_gone_the_usual_way_is_never_also_in_a_chunk(monkeypatch):
    """The scheduler starts files in order on several threads, and they reach the lane's lock in
    any order: file 7 can find its host not yet near (the usual way: ``fetch_file`` runs it) just
    before file 5, a moment later, finds it near and builds a chunk from 5 on. That chunk must stop
    before 7, or 7 is fetched twice (two results, a 'done' and a 'cached' line in a -b job's log,
    as a CI run of the test above once showed). The lane's bookkeeping with a real ``Hosts``."""
    import threading
    from dataclasses import replace

    from prefetch.engine.hosts import Hosts
    from prefetch.flow.file_list import _Lane
    from prefetch.flow.options import FetchOptions

    monkeypatch.delenv("PREFETCH_BULK", raising=False)
    hosts = Hosts(budget=4)
    options = FetchOptions()
    options = replace(options, transfer=replace(options.transfer, hosts=hosts))
    lane = _Lane([None] * 10, options)
    lane.urls = {i: f"http://127.0.0.1:9/f{i}" for i in range(10)}  # (every file eligible, one host)
    host = hosts.host_for(lane.urls[0])
    stop = threading.Event()
    assert lane.chunk_from(7, stop) is None, "not near yet: the usual way"
    host.route.add(0.001)  # an answer in 1 ms: the host is near
    got_host, chunk = lane.chunk_from(5, stop)
    assert got_host is host and [i for i, _, _ in chunk] == [5, 6]
    assert lane.taken(7) and lane.chunk_from(7, stop) == ()


def test_the_lanes_heads_read_from_remembered_lines_as_from_new_ones():
    """The lane remembers the header lines it has parsed (a server's answers repeat most of
    theirs): a head read again, from remembered lines, is what it was the first time and what
    http.client reads; a line refused is refused again; names are case-blind, a repeated header
    joined, two different Content-Lengths refused even when each was remembered alone."""
    import http.client
    import io

    import pytest

    from prefetch.engine import bulk_head
    from prefetch.engine.bulk_head import OutOfStep, parse_head

    heads = [b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 5\r\nVary: a\r\nvary: b\r\nETag: \"x\"\r\n\r\n",
             b"HTTP/1.1 206 Partial Content\r\nCONTENT-LENGTH:  5 \r\nContent-Range: bytes 0-4/5\r\n\r\n",
             b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"]
    for rounds in range(2):
        for head in heads:
            got, body = parse_head(head + b"hello")
            assert body == len(head) and got.status in (200, 206)
            expected = http.client.parse_headers(io.BytesIO(head.split(b"\r\n", 1)[1]))
            assert dict(got.headers) == {k.lower(): ", ".join(expected.get_all(k)) if k.lower() != "content-length"
                                         else expected[k].strip() for k in expected}, (rounds, head)
            assert got.close == (b"close" in head)
    assert b"Server: nginx" in bulk_head._LINES  # (read from the memory the second time)
    for bad in (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nBad Name: x\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nno colon\r\n\r\n"):
        for _ in range(2):
            with pytest.raises(OutOfStep):
                parse_head(bad + b"hello")
