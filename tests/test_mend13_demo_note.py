"""``prefetch demo`` drops one connection on purpose; the note about the request sent ahead on
it said the answers "ended out of step", in every run (under ``ulimit -n 12`` too, where it read
as the cause of the failure). The note says what came: the connection was closed. Under 12
descriptors the demo still ends with the one line about open files and exit 5."""

from __future__ import annotations

from tests.test_mend12_open_files import LINE, _run


def test_the_demos_dropped_connection_is_not_called_out_of_step(home):
    proc = _run(1024, "demo")
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    assert "out of step" not in text, text
    notes = [line for line in text.splitlines() if "request sent ahead" in line]
    assert all("was cut off (the server closed or reset the connection)" in n for n in notes), notes


def test_the_demo_with_12_descriptors_says_only_the_open_files_line(home):
    proc = _run(12, "demo")
    assert proc.returncode == 5, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "out of step" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    (error,) = [x for x in proc.stderr.splitlines() if x.startswith("prefetch: error:")]
    assert LINE.format(n=12) in error, error
