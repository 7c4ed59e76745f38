"""A background job that runs out of file descriptors (`ulimit -n` low in the cell that ran
`prefetch get -b`; the worker inherits it): its record and `prefetch wait` say the foreground's
one line (too many open files, the limit, how to raise it) and exit 5. Before: the worker's last
resort imported ``traceback`` (a file it could not open) and died, the record stayed "running",
and `wait` said "interrupted (exit 7): the worker stopped without finishing" a minute later."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.test_jobs import job_id_from
from tests.test_mend12_open_files import LINE, _limited, _run

_start = _run  # (a -b get under the limit: its launcher's answer)


def test_a_job_out_of_file_descriptors_records_the_line_and_wait_exits_5(home, origin, tmp_path):
    data = os.urandom(300_000)
    origin.put("d.bin", data)
    origin.put("e.bin", data)
    refused = []
    for n in range(6, 13):
        out = tmp_path / f"out{n}"
        started = _start(n, "get", "-b", origin.url_for("d.bin"), origin.url_for("e.bin"), "-P", str(out),
                         cwd=tmp_path)
        text = started.stdout + started.stderr
        assert "internal error" not in text and "Traceback" not in text, (n, text)
        if started.returncode != 0:  # the launcher itself out of descriptors: its one line
            assert started.returncode == 5 and LINE.format(n=n) in started.stderr, (n, text)
            refused.append(n)
            continue
        job = job_id_from(started.stdout + started.stderr)
        waited = run_cli("wait", job, "--timeout", "50", cwd=tmp_path)
        said = waited.stdout + waited.stderr
        assert "internal error" not in said and "stopped without finishing" not in said, (n, said)
        record = json.loads((home / ".prefetch" / "state" / "jobs" / f"{job}.json").read_text()) \
            if (home / ".prefetch" / "state" / "jobs" / f"{job}.json").exists() else None
        if waited.returncode == 0:
            assert (out / "d.bin").read_bytes() == data and (out / "e.bin").read_bytes() == data
            continue
        assert waited.returncode == 5, (n, waited.returncode, said)
        errors = [x for x in waited.stderr.splitlines() if x.startswith("prefetch: error:")]
        assert errors and all(LINE.format(n=n) in x for x in errors), (n, waited.stderr)
        if record is not None:
            assert record["state"] == "failed" and record["exit_code"] == 5, (n, record)
            assert LINE.format(n=n) in (record["error"] or ""), (n, record)
        refused.append(n)
    assert refused, "no limit was low enough to refuse"


def test_a_job_started_with_an_inherited_descriptor_above_the_limit(home, origin, tmp_path):
    """A cell whose process holds a descriptor numbered above its (lowered) soft limit: glibc's
    posix_spawn refuses a close action for it (EBADF), and `get -b` said "internal error"."""
    data = os.urandom(100_000)
    origin.put("d.bin", data)
    high = 200
    read_end, write_end = os.pipe()
    os.dup2(read_end, high, inheritable=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "prefetch", "get", "-b", origin.url_for("d.bin"), "-P",
                               str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                              env=os.environ.copy(), stdin=subprocess.DEVNULL, preexec_fn=_limited(64),
                              pass_fds=(high,), cwd=tmp_path)
    finally:
        for fd in (high, read_end, write_end):
            os.close(fd)
    assert proc.returncode == 0, proc.stderr
    waited = run_cli("wait", job_id_from(proc.stdout + proc.stderr), "--timeout", "50", cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    assert (tmp_path / "out" / "d.bin").read_bytes() == data
