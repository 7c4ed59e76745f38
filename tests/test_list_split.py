"""A long list from a near host on both cores (``flow/list_split.py``): the list's second half
in a forked process, its files reported by the parent as its own; a stop and a kill of the
parent reaching the child; never in a background job or beside another thread."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from tests.nginx import NginxServer
from tests.test_bulk import _check, _files, _list

NOTE = re.compile(r"files (\d+)-(\d+) on a second process \(pid (\d+)\)")


def _gone(pid: int, seconds: float = 60.0) -> bool:
    """The process has exited (or is a zombie nobody reaped yet), waiting up to ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _mostly_stopped(out, theirs: list[str]) -> bool:
    """Most of the second process's files are not in place: it stopped (left running, it places
    them all: ~12 s at the test's rate)."""
    return len([n for n in theirs if not (out / n).exists()]) > len(theirs) // 2


def _env() -> dict:
    env = os.environ.copy()
    env.pop("PREFETCH_SPLIT", None)
    return env


def test_the_list_end_is_fetched_by_a_second_process(home, tmp_path, cli):
    """1,200 files of 4 KiB from nginx on loopback: the log names a second process (not the CLI
    itself) for the list's second half; those files came on TCP connections that served none of
    the first half's (nginx's $connection); every file is in place once, with one "done" line
    each; the second process is gone when the CLI returns. With the split off (PREFETCH_SPLIT=0),
    no such note, and the whole list on the one process's connections."""
    files = _files(tmp_path / "www", 1200, 4 << 10)
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), env=_env())
        assert proc.returncode == 0, proc.stderr[-2000:]
        _check(out, files)
        found = NOTE.search(proc.stderr)
        assert found, proc.stderr[-2000:]
        first, last, pid = (int(g) for g in found.groups())
        assert last == len(files) and 600 < first <= 700
        done = re.findall(r"(f\d{4}\.bin) done ", proc.stderr)
        assert sorted(done) == sorted(files), "one done line per file, the child's files included"
        assert _gone(pid, 5.0), "the second process is reaped when the CLI returns"
        served = server.served()
        assert len(served) == len(files)
        names = sorted(files)
        child = set(names[first - 1:])
        theirs = {conn for _, _, conn, _, request in served if request.split()[1].lstrip("/") in child}
        ours = {conn for _, _, conn, _, request in served if request.split()[1].lstrip("/") not in child}
        assert theirs and not theirs & ours, "the second half on connections of its own"

        again = tmp_path / "again"
        off = dict(_env(), PREFETCH_SPLIT="0")
        proc = cli("get", "-i", str(listing), "-P", str(again), env=off)
        assert proc.returncode == 0, proc.stderr[-2000:]
        _check(again, files)
        assert not NOTE.search(proc.stderr)


def test_a_stop_reaches_the_second_process_and_a_kill_leaves_no_orphan(home, tmp_path):
    """A slow nginx (8 KiB/s a connection) so that the list is still running: SIGINT to the CLI
    once the second process has its files ends both (exit 7, the second process gone, files
    of its half reported interrupted, no final file incomplete). Then SIGKILL of a second CLI:
    its second process, its parent gone, stops and exits by itself."""
    files = _files(tmp_path / "www", 800, 4 << 10)
    with NginxServer(tmp_path / "www", limit_rate="8k") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        for how in ("interrupt", "kill"):
            out = tmp_path / f"out-{how}"
            proc = subprocess.Popen([sys.executable, "-m", "prefetch", "get", "-i", str(listing), "-P", str(out)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=_env())
            lines = []
            pid = None
            try:
                for line in proc.stderr:
                    lines.append(line)
                    found = NOTE.search(line)
                    if found:
                        pid = int(found.group(3))
                        break
                assert pid is not None, "".join(lines)[-2000:]
                assert not _gone(pid, 0.0)
                if how == "interrupt":
                    proc.send_signal(signal.SIGINT)
                    _, rest = proc.communicate(timeout=60)
                    err = "".join(lines) + rest
                    assert proc.returncode == 7, err[-2000:]
                    assert _gone(pid, 5.0), "the second process ended with the CLI"
                    first = int(NOTE.search(err).group(1))
                    assert _mostly_stopped(out, sorted(files)[first - 1:]), "the stop reached the second process"
                    shown = len(re.findall(r"^prefetch: error: f\d{4}\.bin: ", err, re.M))
                    more = re.search(r"and (\d+) more files stopped or not started", err)
                    done = len(re.findall(r" done ", err))
                    assert shown + int(more.group(1)) + done == len(files), "every file reported once"
                else:
                    proc.kill()
                    proc.wait(timeout=60)
                    assert _gone(pid, 30.0), "the second process outlived its killed parent"
                    first = int(NOTE.search("".join(lines)).group(1))
                    assert _mostly_stopped(out, sorted(files)[first - 1:]), "it stopped, its parent gone"
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for path in out.iterdir() if out.exists() else ():
                if path.suffix == ".bin":
                    assert path.read_bytes() == files[path.name], path.name


def test_no_second_process_beside_another_thread_or_in_a_background_job(home, tmp_path, cli):
    """A program with a thread of its own calling the CLI in its process (a fork there could copy
    a lock that thread holds), and a ``-b`` job (it keeps to one core beside training): the
    1,200 files are fetched, and no second process is named."""
    files = _files(tmp_path / "www", 1200, 4 << 10)
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        code = ("import threading, sys\n"
                "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
                "from prefetch.cli import main\n"
                "main(['get', '-i', sys.argv[1], '-P', sys.argv[2]])\n")
        out = tmp_path / "threaded"
        proc = subprocess.run([sys.executable, "-c", code, str(listing), str(out)], capture_output=True, text=True,
                              env=_env(), timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-2000:]
        _check(out, files)
        assert "files, up to" in proc.stderr and not NOTE.search(proc.stderr)

        # (the job: 640 files, past the split's 600: a job runs at nice 19, slow on a loaded machine)
        few = dict(list(files.items())[:640])
        job_out = tmp_path / "job"
        proc = cli("get", "-b", "-i", str(_list(tmp_path / "few.txt", server, few)), "-P", str(job_out), env=_env())
        assert proc.returncode == 0, proc.stderr
        waited = cli("wait", env=_env(), timeout=900)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        _check(job_out, few)
        log = cli("log", env=_env())
        assert "640 files, up to" in log.stdout and not NOTE.search(log.stdout), log.stdout[-2000:]
