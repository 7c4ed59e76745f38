"""Kaggle's quirks, tried for real: ``/kaggle/input`` is read-only (here a read-only mount,
as tests/test_disk.py makes them), and a notebook with the internet off (every name fails to
resolve: ``PREFETCH_RESOLVE='*=fail'``). Each is one ``prefetch: error:`` line with its exit
code (5, 3), the same from a ``-b`` job's ``wait``, and nothing left half-made.
"""

from __future__ import annotations

import hashlib
import os
import random

from prefetch.errors import ExitCode
from tests.conftest import run_cli
from tests.test_bad_input import one_error_line
from tests.test_disk import tmpfs  # noqa: F401 - the fixture
from tests.test_jobs import job_id_from

DATA = random.Random(1415).randbytes(200_000)
SHA = hashlib.sha256(DATA).hexdigest()


def test_a_read_only_input_dir_as_the_target_names_the_options_that_choose_another(cli, origin, tmpfs):  # noqa: F811
    origin.put("d.bin", DATA)
    ro = tmpfs("1m", read_only=True, name="kaggle-input")
    line = one_error_line(cli("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(ro.path)),
                          ExitCode.FILESYSTEM)
    assert "Read-only file system" in line and str(ro.path) in line
    assert "-P DIR or -o PATH for a URL" in line, line  # (was: "choose a writable --cache-dir", no such choice here)
    line = one_error_line(cli("get", "mnist", "--cache-dir", str(ro.path)), ExitCode.FILESYSTEM)
    assert "--cache-dir" in line
    assert os.listdir(ro.path) == []


def test_internet_off_is_one_line_exit_3_in_the_foreground_and_from_a_job(home, tmp_path):
    env = dict(os.environ, PREFETCH_RESOLVE="*=fail", PREFETCH_RETRIES="1")
    out = tmp_path / "working"
    out.mkdir()
    for args in (["get", "https://www.kaggle.com/d.bin", "--sha256", SHA, "-P", str(out)], ["get", "mnist"]):
        proc = run_cli(*args, env=env)
        assert proc.returncode == ExitCode.NETWORK and "Traceback" not in proc.stderr, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error: ")]
        assert len(errors) == 1 and "name lookup failed" in errors[0], proc.stderr  # (and its retries' notes)
    started = run_cli("get", "https://www.kaggle.com/d.bin", "--sha256", SHA, "-P", str(out), "-b", env=env)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60", env=env)
    assert waited.returncode == ExitCode.NETWORK and "name lookup failed" in waited.stderr, waited.stderr
    assert os.listdir(out) == []  # no .part, no state file: nothing was fetched
    keras = home / ".keras" / "datasets"
    assert not keras.exists() or [p.name for p in keras.iterdir()] == []


def test_a_job_into_a_read_only_input_dir_is_refused_in_the_cell_that_starts_it(cli, origin, tmpfs, home):  # noqa: F811
    """``!prefetch get URL -P /kaggle/input -b``: one line, exit 5, at once (before: "started
    job", then ``wait`` said exit 5); no job record left. A file already in place there is no
    write: that job starts (and ends at once)."""
    origin.put("d.bin", DATA)
    ro = tmpfs("1m", read_only=True, name="kaggle-input-b")
    line = one_error_line(cli("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(ro.path), "-b"),
                          ExitCode.FILESYSTEM)
    assert "Read-only file system" in line and str(ro.path) in line and "-P DIR" in line
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-P", str(ro.path / "sub" / "dir"), "-b"),
                          ExitCode.FILESYSTEM)
    assert str(ro.path) in line
    jobs = home / ".prefetch" / "state" / "jobs"
    assert not jobs.exists() or not list(jobs.glob("*.json"))

    # A job whose folder became read-only since: its resume says so too, and changes nothing.
    later = tmpfs("1m", name="kaggle-input-later")
    origin.total_rate = 50 << 10
    job = job_id_from(cli("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(later.path), "-b").stdout)
    assert cli("cancel", job).returncode == 0
    origin.total_rate = None
    later.remount("ro")
    line = one_error_line(cli("resume", job), ExitCode.FILESYSTEM)
    assert "Read-only file system" in line and str(later.path) in line
    assert cli("status", job, "--json").stdout.count('"cancelled"') >= 1

    placed = tmpfs("1m", name="kaggle-input-placed")
    assert cli("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(placed.path)).returncode == 0
    placed.remount("ro")
    started = cli("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(placed.path), "-b")
    assert started.returncode == 0, started.stderr
    waited = cli("wait", job_id_from(started.stdout), "--timeout", "60")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (placed.path / "d.bin").read_bytes() == DATA
