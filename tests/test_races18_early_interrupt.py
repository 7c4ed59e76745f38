"""A Ctrl-C in the first moments of ``prefetch get``: one line and exit 7, never a traceback.

``get`` turned a Ctrl-C into "interrupted; run the same command again to resume" (exit 7) only
once ``cli._main`` ran; one that came while the command was still importing prefetch's modules
(0.1-1.5 s of a loaded machine) printed Python's traceback of that import, exit 1 or -2. Now
``prefetch/__init__`` sets a quiet handler first thing in the command's own process (its console
script, ``python -m prefetch``) and ``cli._main`` puts Python's back inside its ``try``. The
test hook ``PREFETCH_TEST_PAUSE_START`` (inert unless set) stops the start at a point, saying so
on stderr, so the Ctrl-C lands there every run. (A Ctrl-C in the interpreter's own start, site
and its .pth files, comes before any code of prefetch: that one stays Python's.)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "prefetch"  # (the console script pip made, beside this interpreter)
COMMANDS = [[sys.executable, "-m", "prefetch"]] + ([[str(SCRIPT)]] if SCRIPT.is_file() else [])


@pytest.fixture
def silent_server():
    """A server that takes connections and never answers: a get waits on it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/x.bin"


def _start(command: list[str], url: str, tmp_path: Path, pause: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("SHELL", "TERM", "PREFETCH_TEST_PAUSE_START")}
    env["PREFETCH_HOME"] = str(tmp_path / "home")
    if pause:
        env["PREFETCH_TEST_PAUSE_START"] = pause
    return subprocess.Popen([*command, "get", url, "-o", str(tmp_path / "out" / "x.bin")], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp_path))


def _interrupted(run: subprocess.Popen) -> str:
    run.send_signal(signal.SIGINT)
    _, rest = run.communicate(timeout=60)
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest
    assert run.returncode == 7, (run.returncode, rest)
    last = rest.strip().splitlines()[-1]  # ("interrupted; ...", or the file's own "x.bin: stopped at ...")
    assert last.startswith("prefetch: error: ") and last.endswith("; run the same command again to resume"), rest
    return rest


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(Path(c).name for c in cmd) for cmd in COMMANDS])
@pytest.mark.parametrize("pause", ["import", "main"])
def test_a_ctrl_c_at_the_commands_start_is_one_line_and_exit_7(command, pause, silent_server, tmp_path):
    run = _start(command, silent_server, tmp_path, pause)
    try:
        assert run.stderr.readline().strip() == f"paused at {pause}"  # (importing prefetch.cli / in _main)
        _interrupted(run)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)


def test_a_ctrl_c_while_the_get_waits_for_its_server_is_one_line_and_exit_7(silent_server, tmp_path):
    run = _start(COMMANDS[0], silent_server, tmp_path, None)
    try:
        rest = ""
        while "x.bin" not in rest:  # (its first line names the file: it is waiting for the answer)
            line = run.stderr.readline()
            assert line, run.communicate(timeout=60)
            rest += line
        _interrupted(run)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)


def test_importing_prefetch_leaves_sigint_alone():
    """A script (or a kernel) that imports prefetch keeps Python's SIGINT handler: its Ctrl-C is its own."""
    code = ("import signal, prefetch, prefetch.cli\n"
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


USERS_SCRIPT = '''#!{python}
import sys
import time

try:
    import prefetch  # (a program of the user's own that uses prefetch's API)
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    time.sleep(120)
finally:
    with open(sys.argv[1], "w") as marker:
        marker.write("cleaned up")
'''


@pytest.mark.parametrize("how", ["python prefetch", "./prefetch"])
def test_a_users_own_script_named_prefetch_keeps_its_ctrl_c_and_its_finally(how, tmp_path):
    """A script of the user's named ``prefetch`` (run by path, as a shell finds it) took the early
    handler meant for the command: a Ctrl-C was exit 7 by ``os._exit``, its ``finally`` never ran.
    Only the wrapper an installer writes for ``prefetch.cli:run`` (or ``python -m prefetch``) gets it."""
    script = tmp_path / "bin" / "prefetch"
    script.parent.mkdir()
    script.write_text(USERS_SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    marker = tmp_path / "marker"
    command = [sys.executable, str(script)] if how == "python prefetch" else [str(script)]
    env = {k: v for k, v in os.environ.items() if k not in ("SHELL", "TERM", "PREFETCH_TEST_PAUSE_START")}
    run = subprocess.Popen([*command, str(marker)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=str(tmp_path))
    try:
        assert run.stdout.readline().strip() == "ready", run.communicate(timeout=60)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    assert run.returncode != 7 and "interrupted; run the same command again" not in err, (run.returncode, err)
    assert "KeyboardInterrupt" in err, err  # (Python's own Ctrl-C: the script's business)
    assert marker.read_text() == "cleaned up", "the script's finally never ran"


# The wrappers installers write for ``prefetch = prefetch.cli:run``: uv's (pip's is the SCRIPT above).
UV_WRAPPER = '''#!{python}
# -*- coding: utf-8 -*-
import sys
from prefetch.cli import run
if __name__ == "__main__":
    if sys.argv[0].endswith("-script.pyw"):
        sys.argv[0] = sys.argv[0][:-11]
    elif sys.argv[0].endswith(".exe"):
        sys.argv[0] = sys.argv[0][:-4]
    sys.exit(run())
'''


# pip's (distlib's) and uv's wrapper where the interpreter's path holds a space or is longer than a
# shebang may be (a venv under "My Drive/..."): /bin/sh runs the interpreter on the script.
SH_WRAPPER = r"""#!/bin/sh
'''exec' "{python}" "$0" "$@"
' '''
# -*- coding: utf-8 -*-
import re
import sys
from prefetch.cli import run
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\.pyw|\.exe)?$', '', sys.argv[0])
    sys.exit(run())
"""
HOW = {"/abs/bin/prefetch": None, "bin/prefetch": ["bin/prefetch"], "./bin/prefetch": ["./bin/prefetch"],
       "python bin/prefetch": [sys.executable, "bin/prefetch"]}


@pytest.mark.parametrize("wrapper,how", [(UV_WRAPPER, "/abs/bin/prefetch"), (UV_WRAPPER, "bin/prefetch"),
                                         (UV_WRAPPER, "./bin/prefetch"), (UV_WRAPPER, "python bin/prefetch"),
                                         (SH_WRAPPER, "/abs/bin/prefetch")],
                         ids=["uv", "uv-relative", "uv-dot-relative", "uv-python-relative", "sh-exec"])
def test_another_installers_wrapper_is_still_the_command(wrapper, how, silent_server, tmp_path):
    """Typed by a relative path (``.venv/bin/prefetch get ...``: argv[0] as typed, __file__ made
    absolute), or written with the /bin/sh shebang, the wrapper was taken for a user's own script
    named prefetch: an early Ctrl-C printed Python's traceback."""
    script = tmp_path / "bin" / "prefetch"
    script.parent.mkdir()
    script.write_text(wrapper.format(python=sys.executable))
    script.chmod(0o755)
    run = _start(HOW[how] or [str(script)], silent_server, tmp_path, "import")
    try:
        assert run.stderr.readline().strip() == "paused at import"
        _interrupted(run)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
