"""The failures' lines at the end of a get: each error once, none that another quotes."""

from __future__ import annotations

from prefetch.commands.get_run import QUOTERS, _distinct


def _file_error(i: int) -> str:
    return f"f{i:05d}.bin: 404 Not Found for http://127.0.0.1:8080/data/f{i:05d}.bin"


def test_a_summary_quoting_a_files_error_drops_that_line_among_thousands():
    errors = [_file_error(i) for i in range(3 * QUOTERS)]
    summary = f"hf://org/x: 3 of 10 file(s) not in place; first: {errors[7]}"
    shown = _distinct([*errors, errors[3], summary, ""])
    assert summary in shown and errors[7] not in shown
    assert len(shown) == len(errors)  # the duplicate and the empty error once/never; the quoted one gone
    assert shown.count(errors[3]) == 1


def test_errors_that_merely_share_words_are_all_kept():
    errors = ["a.bin: timed out", "b.bin: timed out", "timed out"]
    assert _distinct(errors) == ["a.bin: timed out", "b.bin: timed out"]  # "timed out" is quoted by both
    assert _distinct(["x", "y"]) == ["x", "y"]
