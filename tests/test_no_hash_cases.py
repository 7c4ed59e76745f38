"""Three cases that used to end badly without an expected hash (issue 21, item 5).

1. The origin keeps its ETag and Last-Modified while its bytes change between two runs:
   the kept bytes are sampled against the origin before a resume, and a difference starts
   the file over (never a file stitched from two versions).
2. A state file says complete while the ``.part`` holds zeros: the same sample catches it;
   the zeros are never placed.
3. A truncated archive fails extraction (exit 4): its bytes are not kept as complete, so
   once the origin is fixed the same command downloads it again and succeeds.

The decisions are stated in docs/guarantees.md. In-process runs of ``prefetch get URL -o
OUT`` (and the real CLI for the archive) against the local origin.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from prefetch.errors import ExitCode
from tests.archives import tar_gz
from tests.conftest import run_cli
from tests.origin import CloseAfter
from tests.test_faults import assert_success, fault_env, get_file

SIZE = 512 << 10
OLD = random.Random(21).randbytes(SIZE)
NEW = random.Random(22).randbytes(SIZE)
STAMP = 1_700_000_000


def part_of(out: Path) -> Path:
    return Path(f"{out}.part")


def state_of(out: Path) -> Path:
    return Path(f"{out}.part.json")


def notes(events) -> str:
    return "\n".join(e.message or "" for e in events)


def interrupted(origin, out: Path, name: str) -> None:
    """A first run that stops after 200 KB, leaving a .part and its state."""
    origin.add_fault(CloseAfter(200_000, path=name))
    first = get_file(origin.url_for(name), out, env=fault_env(PREFETCH_RETRIES="0"), connections=1)
    assert first.exit_code == ExitCode.NETWORK, first.error
    assert json.loads(state_of(out).read_text())["done"]


def test_same_etag_new_bytes_starts_over_instead_of_stitching(home, origin, tmp_path):
    out = tmp_path / "dl" / "data.bin"
    out.parent.mkdir()
    origin.put("data.bin", OLD, etag='"v"', last_modified=STAMP)
    interrupted(origin, out, "data.bin")

    origin.put("data.bin", NEW, etag='"v"', last_modified=STAMP)  # a server that keeps its validators
    events: list = []
    second = get_file(origin.url_for("data.bin"), out, env=fault_env(), events=events)

    assert_success(second, out, NEW, verified=False)
    assert "differ from" in notes(events) and "restarting from 0" in notes(events)
    assert second.reused == 0


def test_same_etag_same_bytes_resumes(home, origin, tmp_path):
    """The sample costs a request, not the partial: an unchanged file still resumes."""
    out = tmp_path / "dl" / "data.bin"
    out.parent.mkdir()
    origin.put("data.bin", OLD, etag='"v"', last_modified=STAMP)
    interrupted(origin, out, "data.bin")

    second = get_file(origin.url_for("data.bin"), out, env=fault_env())

    assert_success(second, out, OLD, verified=False)
    assert second.reused >= 200_000


def test_a_state_saying_complete_over_zeros_is_not_placed(home, origin, tmp_path):
    out = tmp_path / "dl" / "data.bin"
    out.parent.mkdir()
    origin.put("data.bin", OLD, etag='"v"', last_modified=STAMP)
    interrupted(origin, out, "data.bin")
    state = json.loads(state_of(out).read_text())
    state["done"] = [[0, SIZE]]  # complete, says the state ...
    state_of(out).write_text(json.dumps(state))
    part_of(out).write_bytes(bytes(SIZE))  # ... over zeros (a reset VM, a lost write)

    events: list = []
    second = get_file(origin.url_for("data.bin"), out, env=fault_env(), events=events)

    assert_success(second, out, OLD, verified=False)
    assert "differ from" in notes(events)


def test_the_origin_unreachable_for_the_sample_keeps_the_partial(home, origin, tmp_path):
    """No resume on weak evidence, and no bytes lost: the run ends (exit 3), the partial stays."""
    out = tmp_path / "dl" / "data.bin"
    out.parent.mkdir()
    origin.put("data.bin", OLD, etag='"v"', last_modified=STAMP)
    interrupted(origin, out, "data.bin")
    kept = part_of(out).read_bytes()
    origin.stop()

    second = get_file(origin.url_for("data.bin"), out, env=fault_env(PREFETCH_RETRIES="0"))

    assert second.exit_code == ExitCode.NETWORK
    assert not out.exists() and part_of(out).read_bytes() == kept


def test_a_truncated_archive_is_downloaded_again_once_the_origin_is_fixed(home, origin, tmp_path):
    archive = tar_gz({"a.bin": random.Random(1).randbytes(300_000), "b.txt": b"b" * 1000}, folder="set")
    # The broken upload keeps the fixed one's validators: only the bytes can tell.
    origin.put("set.tar.gz", archive[: len(archive) // 2], etag='"same"', last_modified=STAMP)
    args = ("get", origin.url_for("set.tar.gz"), "--extract", "-P", str(tmp_path / "out"))

    first = run_cli(*args)
    assert first.returncode == 4, first.stderr
    assert "truncated" in first.stderr and "downloads it again" in first.stderr, first.stderr
    out = tmp_path / "out" / "set.tar.gz"
    assert not out.exists() and not part_of(out).exists() and not state_of(out).exists()

    origin.put("set.tar.gz", archive, etag='"same"', last_modified=STAMP)
    second = run_cli(*args)
    assert second.returncode == 0, second.stderr
    assert out.read_bytes() == archive
    assert (tmp_path / "out" / "set" / "b.txt").read_bytes() == b"b" * 1000
