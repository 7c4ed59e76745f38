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


def test_ctrl_c_stops_a_foreground_get_and_a_second_one_exits_at_once(home, origin, tmp_path):
    import signal
    import subprocess
    import threading

    from prefetch.cache.layout import part_path, state_path
    from prefetch.engine.resume_state import read_progress
    from tests.helpers import start_cli
    from tests.test_notebook import poll

    origin.put("slow.bin", os.urandom(16 << 20))
    origin.total_rate = 512 << 10  # 32 s for the whole file
    final = tmp_path / "slow.bin"

    def bytes_on_disk() -> int:
        progress = read_progress(part_path(final), state_path(final))
        return progress[0] if progress else 0

    for presses in (1, 2):
        before = bytes_on_disk()
        proc = start_cli("get", origin.url_for("slow.bin"), "-o", str(final),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        try:
            poll(lambda: bytes_on_disk() > before or proc.poll() is not None, what="new bytes on disk")
            proc.send_signal(signal.SIGINT)
            if presses == 2:  # as a person presses again: after the first was taken
                poll(lambda: any("Ctrl-C again to stop at once" in line for line in lines), what="the first")
                proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)  # generous: the behaviour is about a second
            reader.join(timeout=10)
            err = "".join(lines)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 7, err
        assert "Traceback" not in err and not final.exists() and bytes_on_disk() > 0  # resumable
        if presses == 1:
            assert "stopped at" in err and "run the same command again to resume" in err, err
        else:
            # At once, or (when the clean stop had already finished) still exit 7, never killed by the signal.
            assert "interrupted again: stopped at once" in err or "stopped at" in err, err

    origin.total_rate = None
    kept = bytes_on_disk()
    done = start_cli("get", origin.url_for("slow.bin"), "-o", str(final),
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    assert "already on disk" in err and final.stat().st_size == 16 << 20 and kept > 0
