"""Messages that help: where -o puts a file, which jobs status shows, --plain and NO_COLOR."""

from __future__ import annotations

import json
import os
import time

from prefetch.jobs import FileStatus, JobRecord, write_record
from tests.test_render_tty import run_on_pty


def test_output_dir_puts_the_file_inside(cli, origin, tmp_path):
    origin.put("inside.bin", b"x" * 5000)
    existing = tmp_path / "existing"
    existing.mkdir()
    got = cli("get", origin.url_for("inside.bin"), "-o", str(existing))
    assert got.returncode == 0, got.stderr
    assert (existing / "inside.bin").read_bytes() == b"x" * 5000

    fresh = tmp_path / "newdir"
    got = cli("get", origin.url_for("inside.bin"), "-o", f"{fresh}/", "--json")
    assert got.returncode == 0, got.stderr
    (result,) = json.loads(got.stdout)
    assert result["path"] == str(fresh / "inside.bin") and (fresh / "inside.bin").is_file()
    # --json names the source that delivered the file, with exact bytes.
    assert result["source"] == origin.url_for("inside.bin") and result["sources"] == {result["source"]: 5000}

    background = tmp_path / "bgdir"
    started = cli("get", origin.url_for("inside.bin"), "-o", f"{background}/", "-b")
    assert started.returncode == 0, started.stderr
    assert cli("wait", timeout=60).returncode == 0
    assert (background / "inside.bin").is_file()  # the trailing / survives into the job


def old_record(job_id: str, *, hours: float) -> JobRecord:
    then = time.time() - hours * 3600
    return JobRecord(id=job_id, command="prefetch get x -b", request={"names": ["x"]}, state="done",
                     files=[FileStatus(name="x.bin", dataset="x", path="/nonexistent/x.bin", state="done",
                                       bytes=10, total=10)],
                     started=then, updated=then, finished=then, exit_code=0, host="h", log="")


def test_status_shows_running_and_recent_jobs_and_all_with_a_flag(cli, home):
    write_record(old_record("j0101-0001", hours=48))
    write_record(old_record("j0101-0002", hours=0.1))
    recent = cli("status")
    assert recent.returncode == 0, recent.stderr
    assert "j0101-0002" in recent.stdout and "j0101-0001" not in recent.stdout
    assert "1 older job not shown: `prefetch status --all`" in recent.stdout
    everything = cli("status", "--all")
    assert "j0101-0001" in everything.stdout and "j0101-0002" in everything.stdout


def test_no_color_means_no_escape_byte_and_force_color_colours_a_pipe(cli, home):
    write_record(old_record("j0101-0003", hours=0.1))
    env = dict(os.environ, FORCE_COLOR="1")
    coloured = cli("status", env=env)
    assert "\x1b[" in coloured.stdout
    env["NO_COLOR"] = "1"
    plain = cli("status", env=env)
    assert "\x1b" not in plain.stdout and "j0101-0003" in plain.stdout


def test_plain_flag_gives_log_lines_on_a_terminal(home, origin, tmp_path):
    origin.put("p.bin", os.urandom(1 << 20))
    out = run_on_pty(["get", origin.url_for("p.bin"), "-o", str(tmp_path / "p.bin"), "--plain"], cols=100)
    assert "%|" not in out and "\r\n" in out  # no bar
    lines = [line for line in out.replace("\r\n", "\n").split("\n") if line]
    assert all("\r" not in line and "\x1b" not in line for line in lines), out
    assert any(line.endswith(" p.bin start 1.0MiB") for line in lines), out
