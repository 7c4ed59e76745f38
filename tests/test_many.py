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


def test_a_503_storm_lowers_the_per_host_cap(home, tmp_path, cli):
    """nginx serves 3 connections at once and answers 503 beyond: starting with 12, the
    host's cap comes down (said in the output) and holds, so the storm is the first
    excess only, not a storm per file or per retry; every file arrives."""
    root = tmp_path / "www"
    root.mkdir()
    # 12 KiB at 8 KiB/s: nginx sends the first second's worth at once, then each response
    # lasts about half a second, so requests overlap on the server's side.
    files = _files(root, 30, 12 << 10)
    with NginxServer(root, limit_conn=3, limit_rate="8k") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "12")
        assert proc.returncode == 0, proc.stderr
        _check_placed(out, files)
        log = server.requests()
    output = proc.stdout + proc.stderr
    lowered = [int(n) for n in re.findall(r"at most (\d+) connections? to it from now on", output)]
    assert lowered and min(lowered) <= 3, output[-3000:]
    refused = [r for r in log if r[4] == 503]
    assert refused, "the storm happened"
    assert len(refused) <= 12, f"{len(refused)} refusals for {len(files)} files: the lowered cap did not hold"
    served = [r for r in log if r[4] != 503]
    assert _max_overlap([(r[2], r[3]) for r in served[len(served) // 2:]]) <= 3


def _progress(out: Path) -> dict[str, int]:
    from prefetch.engine.resume_state import read_progress

    done = {}
    for state in out.glob("*.part.json"):
        name = state.name.removesuffix(".part.json")
        got = read_progress(out / f"{name}.part", state)
        if got:
            done[name] = got[0]
    return done


def test_a_kill_mid_list_then_resume_resends_only_bounded_bytes_per_file(home, tmp_path, cli):
    """SIGKILL in the middle of a list; the same command again finishes it: every file is
    right, and no file was sent much more than once (its partial bytes were kept)."""
    from tests.helpers import sigkill_when

    root = tmp_path / "www"
    root.mkdir()
    size = 1 << 20
    files = _files(root, 8, size)
    with NginxServer(root, limit_rate="256k") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        out.mkdir()
        proc = start_cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "4", "-q")
        sigkill_when(proc, lambda: sum(n >= size // 2 for n in _progress(out).values()) >= 3,
                     what="three files half done", details=lambda: str(_progress(out)))
        kept = _progress(out)
        again = cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "4", "-q")
        assert again.returncode == 0, again.stderr
        _check_placed(out, files)
        log = server.requests()
    sent: dict[str, int] = {}
    for r in log:
        name = r[6].split()[1].lstrip("/")
        sent[name] = sent.get(name, 0) + r[5]
    # What a connection receives between two state saves (0.5 s), and nginx's first-second burst:
    # less than the half file a lost resume would send again.
    bound = 384 << 10
    for name in files:
        assert sent[name] <= size + bound, (name, sent[name], kept.get(name))
    assert sum(n >= size // 2 for n in kept.values()) >= 3


def test_fail_fast_stops_every_file(home, tmp_path, cli):
    import subprocess

    """With --fail-fast a missing file among slow ones ends the whole list at once: exit 3,
    every other file interrupted with its partial kept for a resume."""
    root = tmp_path / "www"
    root.mkdir()
    files = _files(root, 8, 4 << 20)
    with NginxServer(root, limit_rate="64k") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        # The missing file second: files start in list order, and on a near host (once one has
        # answered) at most 8 are in flight, so a missing file ninth in the list could start only
        # after the others ended (a loaded machine starts them slowly enough: seen in CI).
        lines = listing.read_text().splitlines(keepends=True)
        listing.write_text(lines[0] + server.url_for("missing.bin") + "\n" + "".join(lines[1:]))
        out = tmp_path / "out"
        proc = start_cli("get", "-i", str(listing), "-P", str(out), "--fail-fast", "--json",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = proc.communicate(timeout=30)  # the files alone would take a minute
    assert proc.returncode == 3, stderr
    import json

    results = {Path(r["path"]).name: r for r in json.loads(stdout)}
    assert results["missing.bin"]["status"] == "failed"
    assert {results[n]["status"] for n in files} == {"interrupted"}
    assert not [n for n in files if (out / n).exists()]


def test_an_interrupt_stops_every_file_and_a_resume_finishes(home, tmp_path, cli):
    """Ctrl-C (SIGINT) in the middle of a list: exit 7 at once, partials kept; then the same command finishes."""
    import subprocess

    root = tmp_path / "www"
    root.mkdir()
    files = _files(root, 10, 1 << 20)
    with NginxServer(root, limit_rate="128k") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        out.mkdir()
        proc = start_cli("get", "-i", str(listing), "-P", str(out), "-q", stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while sum(n > 0 for n in _progress(out).values()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)  # the files alone would take 8 s more at least
        assert proc.returncode == 7, stderr
        assert _progress(out), "partials kept"
        again = cli("get", "-i", str(listing), "-P", str(out), "-q")
        assert again.returncode == 0, again.stderr
        _check_placed(out, files)


def test_a_background_list_is_summarized_in_status_and_logs_one_line_per_file(home, tmp_path, cli):
    """`status` shows one row for a job of many files (files done/total), `status --files` a row
    per file; the job's log has one line per finished file and no per-file start/verify/progress lines."""
    root = tmp_path / "www"
    root.mkdir()
    files = _files(root, 30, 64 << 10)
    with NginxServer(root) as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        job = run_list_job(cli, listing, out)
        _check_placed(out, files)
    assert_job_reports_each_file(cli, job, files)


def run_list_job(cli, listing, out) -> str:
    """``get -i LISTING -P OUT -b``, waited for (both exit 0); the job's id."""
    import json

    started = cli("get", "-i", str(listing), "-P", str(out), "-b", "--json")
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    waited = cli("wait", job, "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    return job


def assert_job_reports_each_file(cli, job: str, files) -> None:
    """A finished ``-b`` job of ``files``: ``status`` has one row counting them all, ``status
    --files`` a row per file, the log one ``done`` line per file."""
    summary = cli("status", job)
    rows = [line for line in summary.stdout.splitlines() if line.startswith(job)]
    assert len(rows) == 1 and f"{len(files)}/{len(files)} files" in rows[0], summary.stdout
    per_file = cli("status", job, "--files")
    assert len([line for line in per_file.stdout.splitlines() if line.startswith(job)]) == len(files), per_file.stdout
    log = cli("log", job).stdout.splitlines()
    for name in files:
        mine = [line for line in log if line.split(" ")[1:2] == [name]]
        assert len(mine) == 1 and " done " in mine[0], mine


def test_the_notebook_line_summarizes_many_files():
    """In a notebook cell, hundreds of files make one status line (counts, bytes, files in flight),
    not a line per file; failures still get their own line."""
    import io

    from prefetch.model.events import Event, EventKind
    from prefetch.ui.render import LiveLineRenderer

    stream = io.StringIO()
    render = LiveLineRenderer(stream, interval=0.0)
    render(Event(EventKind.NOTE, "prefetch", files=200, message="200 files, up to 32 at once"))
    for i in range(200):
        name = f"f{i:03d}.bin"
        render(Event(EventKind.START, name, total=1000))
        render(Event(EventKind.PROGRESS, name, done=500, total=1000, rate=100.0))
        if i == 7:
            render(Event(EventKind.FAILED, name, message="gone", exit_code=3))
            continue
        render(Event(EventKind.VERIFY, name, done=1000, total=1000, message="sha256 ok"))
        render(Event(EventKind.DONE, name, done=1000, total=1000, message="ok"))
    render.close()
    lines = stream.getvalue().split("\n")
    permanent = [line.split("\r")[-1].strip() for line in lines if line.strip()]
    assert any("f007.bin" in line and "gone" in line for line in permanent)
    assert permanent[-1].startswith("199/200 files, 1 failed"), permanent[-3:]
    # Once every file has ended, the last line says what came and how fast on average
    # (no "0B/s, eta ?" of a run with nothing left in flight).
    assert re.fullmatch(r"199/200 files, 1 failed, 194\.3KiB in \d+\.\ds( \(.+/s\))?", permanent[-1]), permanent[-1]
    assert len(permanent) <= 4, permanent

    # Files already here moved no bytes: counted apart, not in the rate.
    stream = io.StringIO()
    render = LiveLineRenderer(stream, interval=0.0)
    render(Event(EventKind.NOTE, "prefetch", files=20, message="20 files, up to 32 at once"))
    for i in range(20):
        kind = EventKind.CACHED if i < 15 else EventKind.DONE
        render(Event(kind, f"g{i:03d}.bin", done=1000, total=1000, message="ok"))
    render.close()
    last = stream.getvalue().split("\n")[-2].split("\r")[-1].strip()
    assert re.fullmatch(r"20/20 files \(15 already here\), 4\.9KiB in \d+\.\ds( \(.+/s\))?", last), last
    stream = io.StringIO()
    render = LiveLineRenderer(stream, interval=0.0)
    render(Event(EventKind.NOTE, "prefetch", files=20, message="20 files, up to 32 at once"))
    for i in range(20):
        render(Event(EventKind.CACHED, f"g{i:03d}.bin", done=1000, total=1000, message="ok"))
    render.close()
    assert stream.getvalue().split("\n")[-2].split("\r")[-1].strip() == "20/20 files (all already here)"

    # At its real interval the line is redrawn a few times, not once per event (a cell's
    # message stream would flood).
    stream = io.StringIO()
    render = LiveLineRenderer(stream)
    render(Event(EventKind.NOTE, "prefetch", files=200, message="200 files, up to 32 at once"))
    for i in range(200):
        for kind in (EventKind.START, EventKind.PROGRESS, EventKind.VERIFY, EventKind.DONE):
            render(Event(kind, f"f{i:03d}.bin", done=1000, total=1000, rate=100.0))
    render.close()
    assert stream.getvalue().count("\r") <= 6, stream.getvalue().count("\r")


def test_files_start_in_order_and_the_hooks_see_each_file_once(home, tmp_path):
    """fetch_files' contract with as_completed: before_start(i) before file i starts, in index
    order; False leaves that file interrupted (not started); on_file_done(i, result) exactly
    once per file, as soon as its result is final."""
    import threading

    from prefetch.flow.planning import run_request
    from prefetch.flow.request import GetRequest

    root = tmp_path / "www"
    root.mkdir()
    files = _files(root, 20, 32 << 10)
    asked: list[int] = []
    done: dict[int, str] = {}
    lock = threading.Lock()

    def before_start(index: int) -> bool:
        asked.append(index)
        return index != 5

    def on_file_done(index: int, result) -> None:
        with lock:
            assert index not in done, f"file {index} reported twice"
            done[index] = result.status

    with NginxServer(root) as server:
        request = GetRequest(names=[], urls=[{"url": server.url_for(n)} for n in files],
                             output_dir=str(tmp_path / "out"))
        results = run_request(request, before_start=before_start, on_file_done=on_file_done)
    assert asked == list(range(20))
    assert sorted(done) == list(range(20))
    assert done[5] == "interrupted" and not (tmp_path / "out" / "f0005.bin").exists()
    assert {s for i, s in done.items() if i != 5} == {"downloaded"}
    assert len(results) == 20
