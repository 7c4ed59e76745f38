"""A resume record that cannot be read because the process has no descriptor left (EMFILE) is
the process's limit, not a bad record: check_state says the one line (exit 5) instead of calling
the record unusable, which made the transfer "start over" and truncate the ``.part`` it
described (mend 250af3d). Real EMFILE: a subprocess holds every descriptor its limit allows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import os, resource, sys
from pathlib import Path
from prefetch.errors import LocalFileError
from prefetch.engine.resume_state import TransferState, check_state, save_state

path = Path(sys.argv[1])
save_state(path, TransferState(urls=["http://127.0.0.1:9/f.bin"], size=1000, done=[[0, 600]]))
assert check_state(path)[0] is not None  # (loads what reading it needs while files can be opened)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
try:
    state, problem = check_state(path)
    said = f"returned state={state is not None} problem={problem}"
except LocalFileError as exc:
    said = f"raised exit={int(exc.exit_code)} {exc}"
for fd in held:
    os.close(fd)
print(said)
"""


def test_a_resume_record_unreadable_for_emfile_is_the_limit_not_an_unusable_record(tmp_path):
    record = tmp_path / "f.bin.part.json"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(record)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.strip()
    assert said.startswith("raised exit=5 "), said  # before the mend: "returned state=False problem=cannot read it"
    assert f"{record}: too many open files (ulimit -n is 64); raise the limit" in said, said
    assert json.loads(record.read_text())["done"] == [[0, 600]]  # the record is as it was
