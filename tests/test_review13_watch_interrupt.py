"""A signal that lands while a lazily imported module defines a dataclass: Python 3.11 raises the
handler's KeyboardInterrupt from a field's ``__set_name__`` as ``RuntimeError("Error calling
__set_name__ on 'Field' instance ...")``. `prefetch wait` ended by SIGTERM then (it imports the
job records' dataclasses after its handlers are in place) said "internal error (a bug in
prefetch)", exit 1, with a crash report, instead of its line and exit 7; seen once in a test run
under load (tests/test_mend12_watch_signals.py). The signal is delivered here at that moment by a
``sitecustomize`` that profiles the real process: the first ``Field.__set_name__`` after the
handler is installed sends the signal to the process itself, a real signal from the kernel."""

from __future__ import annotations

import os
import subprocess
import sys

INJECT = '''
import os, signal, sys
def _prof(frame, event, arg):
    if event != "call" or frame.f_code.co_name != "__set_name__" or not frame.f_code.co_filename.endswith("dataclasses.py"):
        return
    handler = signal.getsignal(signal.{signum})
    if {ready}:
        sys.setprofile(None)
        sys.stderr.write("[signal in __set_name__]\\n")
        os.kill(os.getpid(), signal.{signum})
sys.setprofile(_prof)
'''


def _run(tmp_path, signum: str, ready: str, *args: str) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(INJECT.format(signum=signum, ready=ready))
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, "-m", "prefetch", *args], capture_output=True, text=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL)


def _lines(err: str) -> list[str]:
    return [x for x in err.splitlines() if x.strip() and not x.startswith("[signal in __set_name__]")]


def test_wait_ended_by_sigterm_inside_a_dataclass_import_says_its_line(home, tmp_path):
    done = _run(tmp_path, "SIGTERM", 'getattr(handler, "__qualname__", "").endswith("on_signal")', "wait")
    assert "[signal in __set_name__]" in done.stderr, done.stderr  # (delivered where it was meant to be)
    assert done.returncode == 7, done.stderr
    lines = _lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("prefetch: error: stopped waiting"), done.stderr
    assert not (home / ".prefetch" / "state" / "crashes").exists()


def test_ctrl_c_inside_a_dataclass_import_is_an_interrupt(home, tmp_path):
    done = _run(tmp_path, "SIGINT", '"prefetch.commands.group" in sys.modules', "status")
    assert "[signal in __set_name__]" in done.stderr, done.stderr
    assert done.returncode == 7, done.stderr
    lines = _lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("prefetch: error: interrupted"), done.stderr
    assert not (home / ".prefetch" / "state" / "crashes").exists()
