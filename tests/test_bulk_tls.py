"""The bulk lane over https: a near host's many small files come pipelined on a few kept-alive
TLS connections, as over plain http (most object stores and in-cloud mirrors speak https only).

A real nginx with TLS counts what the lane did (its ``Range`` and ``$connection``), and a
scripted TLS origin (tests/bulk_origin.py) misbehaves mid-batch: a TLS connection has its own
ways to end (a close without TLS's close_notify, a reset), and the lane's reads on a
non-blocking TLS socket must neither stall nor lose bytes. Every file the lane refuses is
handled as ``PREFETCH_BULK=0`` handles it; every other file byte-exact.
"""

from __future__ import annotations

import os

import pytest

from tests.bulk_origin import BulkOrigin
from tests.nginx import NginxServer
from tests.test_bulk import _check, _files, _list, assert_through_the_lane
from tests.test_bulk_hostile import IN_STEP, _errors, _listing
from tests.test_bulk_hostile import _check as _check_hostile
from tests.test_bulk_hostile import _files as _hostile_files


def test_a_list_over_https_goes_through_the_lane_on_few_tls_connections(home, tmp_path, cli):
    """300 files of 16 KiB from nginx over TLS: byte-exact, most through the lane, on a handful
    of connections (each a TLS handshake), one request per file."""
    files = _files(tmp_path / "www", 300, 16 << 10)
    with NginxServer(tmp_path / "www", tls=True) as server:
        assert server.url.startswith("https://")
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q",
                   env={**os.environ, "REQUESTS_CA_BUNDLE": str(server.ca_path)})
        assert proc.returncode == 0, proc.stderr
        _check(out, files)
        assert_through_the_lane(server, files, connections=40)  # (the first files go the usual way, a connection each)


def test_a_certificate_the_run_does_not_trust_is_refused_as_without_the_lane(home, tmp_path, cli):
    """No CA bundle naming the server's CA: the lane never accepts an answer from it; the run
    fails for each file as the usual path does (exit code and lines alike)."""
    files = _files(tmp_path / "www", 30, 4 << 10)
    results = []
    with NginxServer(tmp_path / "www", tls=True) as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        for bulk in ("1", "0"):
            out = tmp_path / f"out{bulk}"
            env = {**os.environ, "PREFETCH_BULK": bulk}
            env.pop("REQUESTS_CA_BUNDLE", None)
            proc = cli("get", "-i", str(listing), "-P", str(out), "-q", "--retries", "1", env=env)
            results.append((proc.returncode, sorted(line.replace(str(out), "OUT") for line in proc.stderr.splitlines()
                                                    if line.startswith("prefetch: error:"))))
            assert not out.exists() or not [p for p in out.iterdir() if p.name in files]
        assert not [r for r in server.served() if r[1] == 206]
    assert results[0] == results[1] and results[0][0] != 0, results


def _run(cli, tmp_path, tag: str, tricks: dict, *, bulk: bool):
    files = _hostile_files()
    out = tmp_path / f"out-{tag}-{int(bulk)}"
    tls = tmp_path / f"tls-{tag}-{int(bulk)}"
    tls.mkdir()
    with BulkOrigin(files, tricks, tls_dir=tls) as origin:
        listing = _listing(tmp_path / f"list-{tag}-{int(bulk)}.txt", origin, files, hashes=False)
        env = {**os.environ, "PREFETCH_BULK": "1" if bulk else "0", "REQUESTS_CA_BUNDLE": str(origin.ca_path)}
        proc = cli("get", "-i", str(listing), "-P", str(out), "--retries", "1", "-q", env=env)
        seen = origin.pipelined(), origin.lane(), {name: origin.lane(name) for name in tricks}
        errors = _errors(proc, out, origin)
    return proc, out, files, errors, seen


def test_refused_answers_over_tls_are_handled_as_the_usual_path_does(home, tmp_path, cli):
    """A 404, a portal page, a redirect, a 206 of another range, a gzip body among pipelined TLS
    answers: exit code and error lines as without the lane; all other files byte-exact."""
    lane, out, files, errors, (ahead, asked, tricked) = _run(cli, tmp_path, "step", IN_STEP, bulk=True)
    usual, out0, _, errors0, (ahead0, asked0, _) = _run(cli, tmp_path, "step", IN_STEP, bulk=False)
    # (How deep it pipelined is the machine's: 4 ahead at load 8-17, 20+ when quiet. That it did,
    # and met every trick on the lane, is the point.)
    assert ahead > 0 and asked > 60, "the lane pipelined the list's requests over TLS"
    assert all(tricked.values()), f"the lane met every trick: {tricked}"
    assert asked0 == 0
    assert lane.returncode == usual.returncode != 0, (lane.stderr, usual.stderr)
    assert errors == errors0, (errors, errors0)
    failed = {"f070.bin", "f071.bin"}
    _check_hostile(out, files, skip=failed)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in out0.iterdir())


@pytest.mark.parametrize("trick", ["once-short", "once-shortnext", "once-long", "once-reset"])
def test_a_tls_answer_out_of_step_hands_the_rest_back_and_every_file_arrives(home, tmp_path, cli, trick):
    """A body cut short then the TCP connection closed without TLS's close_notify, one shorter
    followed by the next answer, one longer, a reset: the lane stops, the usual path fetches what
    it handed back; every file byte-exact, exit 0."""
    proc, out, files, errors, (ahead, asked, tricked) = _run(cli, tmp_path, trick, {"f070.bin": trick}, bulk=True)
    assert ahead > 10 and tricked["f070.bin"], "the lane pipelined the list's requests and met the trick"
    assert proc.returncode == 0, proc.stderr
    _check_hostile(out, files, skip=set())
    assert not [p for p in out.iterdir() if p.name not in files]
