"""Where the command's output cannot go: a full disk under ``>``, and a group called without
its command (`prefetch`, `prefetch jobs`): one line and a documented exit code, or the help
as ``--help`` shows it, never an internal error or the help squeezed onto one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="/dev/full is Linux's")


def run_into_full(*args: str) -> subprocess.CompletedProcess:
    """``python -m prefetch ARGS > /dev/full``: every write to stdout fails with ENOSPC."""
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "prefetch", *args], stdout=full, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, timeout=60, env=os.environ.copy())


@pytest.mark.parametrize("args", [["status"], ["--help"], ["list"], ["jobs"], []])
def test_output_into_a_full_disk_is_one_line_and_exit_5(home, args):
    done = run_into_full(*args)
    assert done.returncode == 5, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("prefetch: error: writing the output: No space left on device")
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    crashes = home / ".local" / "state" / "prefetch" / "crashes"
    assert not crashes.exists() or not any(crashes.iterdir())


@pytest.mark.parametrize("args, usage", [([], "Usage: prefetch [OPTIONS] COMMAND"),
                                         (["jobs"], "Usage: prefetch jobs [OPTIONS] COMMAND")])
def test_a_group_without_its_command_shows_its_help(cli, args, usage):
    done = cli(*args)
    assert done.returncode == 2
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == usage + " [ARGS]..."
    assert "Commands:" in lines  # the help's own layout, a line per section and command
    assert len(lines) > 8


def test_main_called_in_a_python_process_leaves_its_signal_handlers_as_they_were(home, origin, tmp_path):
    """``prefetch.cli.main`` in a process that goes on (a notebook kernel, a script): a ``get``
    ignores Ctrl-C, SIGTERM and SIGHUP once its outcome is decided, which only the process's own
    entry may leave so; a kernel left ignoring SIGINT could no longer be interrupted."""
    import signal

    from prefetch.cli import main

    origin.put("a.bin", b"a" * 5000)
    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {signum: signal.getsignal(signum) for signum in signums}
    with pytest.raises(SystemExit) as done:
        main(["get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), "-q"])
    assert done.value.code == 0 and (tmp_path / "a.bin").read_bytes() == b"a" * 5000
    assert {signum: signal.getsignal(signum) for signum in signums} == before
