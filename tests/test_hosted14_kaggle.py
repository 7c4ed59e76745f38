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
