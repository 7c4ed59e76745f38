"""The failures' lines at the end of a get: each error once, none that another quotes."""

from __future__ import annotations

from prefetch.commands.get_run import QUOTERS, SAME_SHOWN, _distinct, _same_way
from prefetch.model.plans import FileResult


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


def _failed(name: str, error: str) -> FileResult:
    return FileResult(dataset="", name=name, path=f"/data/out/{name}", paths=[], status="failed", error=error,
                      exit_code=5)


def test_two_thousand_files_failing_the_same_way_are_four_lines_naming_the_rest():
    full = [_failed(f"f{i:04d}.bin", f"no space left on the device holding /data/out/f{i:04d}.bin.part, 0.0 KiB free. "
                                     f"Free some space and run the command again to resume") for i in range(2000)]
    gone = [_failed(f"g{i}.bin", f"http://h/x/g{i}.bin answered HTTP 404; check the URL or the mirror") for i in range(2)]
    lines = _same_way(full + gone)
    assert lines[:SAME_SHOWN] == [r.error for r in full[:SAME_SHOWN]]
    assert lines[SAME_SHOWN].startswith(f"... and {2000 - SAME_SHOWN} more files failed the same way (f0003.bin, ")
    assert lines[SAME_SHOWN + 1:] == [r.error for r in gone]  # (another kind, and too few to count: each said)


def test_a_few_files_failing_the_same_way_are_each_said():
    few = [_failed(f"f{i}.bin", f"f{i}.bin: gave up after 30s without a byte") for i in range(SAME_SHOWN + 1)]
    assert _same_way(few) == [r.error for r in few]
