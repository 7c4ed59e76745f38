"""`prefetch wait` and `prefetch log -f` ended by SIGTERM or SIGHUP (a closed terminal, a killed
cell): one line on stderr and exit 7, as for Ctrl-C; the background job goes on to its file."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess

import pytest

from tests.helpers import start_cli
from tests.test_jobs import job_id_from, poll, record, sha256_of, write_synth_registry
from tests.test_jobs import stop_leftover_workers  # noqa: F401 (autouse: kills the workers a test left)


def _catches(pid: int, *signums: int) -> bool:
    """Whether the process has handlers for all of ``signums`` (its /proc SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            line = next(x for x in fh if x.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    mask = int(line.split()[1], 16)
    return all(mask & (1 << (s - 1)) for s in signums)


@pytest.mark.parametrize("command, signum", [(("wait",), signal.SIGTERM), (("wait",), signal.SIGHUP),
                                             (("log", "-f"), signal.SIGTERM), (("log", "-f"), signal.SIGHUP)])
def test_a_watcher_ended_by_a_signal_says_so_exits_7_and_the_job_goes_on(home, origin, tmp_path, cli,
                                                                        command, signum):
    registry, data = write_synth_registry(tmp_path / "registry.toml", origin)
    origin.rate = 400_000  # one connection: ~3 s for the file
    started = cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b")
    assert started.returncode == 0, started.stderr
    job_id = job_id_from(started.stdout)
    watcher = start_cli(*command, job_id, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        start_new_session=True)
    try:
        try:  # (it handles them once it watches; a prefetch that never does is signalled all the same)
            poll(lambda: _catches(watcher.pid, signal.SIGTERM, signal.SIGHUP) or watcher.poll() is not None,
                 timeout=10, what="the watcher's handlers")
        except AssertionError:
            pass
        assert watcher.poll() is None, "the watcher ended before the signal"
        assert record(job_id).active
        os.killpg(watcher.pid, signum)  # the whole session, as a closed terminal hangs it up
        out, err = watcher.communicate(timeout=30)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 7, (watcher.returncode, err)
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("prefetch: error: stopped "), err
    assert "the job keeps running in the background" in lines[0]
    # The job was not touched: it finishes its file.
    waited = cli("wait", job_id, timeout=60)
    assert waited.returncode == 0, waited.stderr
    assert record(job_id).state == "done"
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()
