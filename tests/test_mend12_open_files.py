"""Few file descriptors (`ulimit -n 12; prefetch demo`, a `get` under a tiny limit): one line
saying too many files are open and how to raise the limit, exit 5; never "internal error", a
traceback or a crash report."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from tests.conftest import run_cli  # noqa: F401 - (the cli fixture's runner)

LINE = "too many open files (ulimit -n is {n}); raise the limit (`ulimit -n 4096`"


def _limited(n: int):
    def set_limit() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return set_limit


def _run(n: int, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prefetch", *args], capture_output=True, text=True, timeout=120,
                          env=os.environ.copy(), stdin=subprocess.DEVNULL, preexec_fn=_limited(n), cwd=cwd)


def _crashes(home) -> list:
    return list((home / ".prefetch").rglob("crash-*.txt")) if (home / ".prefetch").exists() else []


def test_the_demo_with_12_file_descriptors_says_so_in_one_line_exit_5(home):
    proc = _run(12, "demo")
    assert proc.returncode == 5, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    errors = [x for x in proc.stderr.splitlines() if x.startswith("prefetch: error:")]
    assert len(errors) == 1 and LINE.format(n=12) in errors[0], proc.stderr
    assert "internal error" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert "demo FAILED" not in proc.stdout + proc.stderr
    assert not _crashes(home)


def test_a_get_under_tiny_limits_places_the_file_or_says_so_in_one_line(home, origin, tmp_path):
    data = os.urandom(300_000)
    origin.put("d.bin", data)
    origin.put("e.bin", data)
    refused = []
    for n in range(5, 11):
        out = tmp_path / f"out{n}" / "d.bin"
        proc = _run(n, "get", origin.url_for("d.bin"), origin.url_for("e.bin"), "-P", str(out.parent),
                    "-q", cwd=tmp_path)
        text = proc.stdout + proc.stderr
        assert "internal error" not in text and "Traceback" not in text, (n, text)
        if proc.returncode == 0:
            assert out.read_bytes() == data and out.with_name("e.bin").read_bytes() == data
            continue
        assert proc.returncode == 5, (n, proc.returncode, text)
        errors = [x for x in proc.stderr.splitlines() if x.startswith("prefetch: error:")]
        assert errors and all(LINE.format(n=n) in x for x in errors), (n, proc.stderr)
        refused.append(n)
    assert refused, "no limit was low enough to refuse"
    assert not _crashes(home)
