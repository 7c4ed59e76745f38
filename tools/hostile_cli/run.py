"""The hostile-input sweep of prefetch's commands and Python API (docs/exit-codes.md's promise).

    python tools/hostile_cli/run.py args [COMMAND...]   # every option of COMMANDs (default all but demo)
    python tools/hostile_cli/run.py env|streams|lists   # variables; stdout/stdin/locales/argv bytes; -i and configs
    python tools/hostile_cli/run.py api                 # the Python API entries

Runs two cases at a time (the machine has 2 cores); a full ``args`` sweep is ~3,500 runs (about
10 minutes), ``env`` ~2,400. Prints each flagged case (see harness.py); the results of the
last set go to hostile-results.jsonl in the current directory. Run it from a neutral
directory with the interpreter whose prefetch you mean (``python -m prefetch`` is what runs).
What it found in its first sitting is kept as tests in tests/test_cli_hostile.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def run(which: str, rest: list[str]) -> None:
    if which == "api":
        import api_sweep

        api_sweep.main()
        return
    if which == "args":
        import cases_args

        cases = cases_args.make(rest or None)
        print(len(cases), "cases", file=sys.stderr)
        harness.main(cases)
        return
    import cases_env

    with harness.OriginServer() as origin:
        origin.put("d.bin", harness.DATA)
        base = origin.url_for("d.bin")[: -len("d.bin")]
        cases = {"env": cases_env.make, "streams": cases_env.make_streams, "lists": cases_env.make_lists}[which](base)
        print(len(cases), "cases", file=sys.stderr)
        harness.main(cases)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("args", "env", "streams", "lists", "api"):
        sys.exit(__doc__)
    run(sys.argv[1], sys.argv[2:])
