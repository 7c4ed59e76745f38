"""SIGKILL the foreground `prefetch get` at random byte offsets, during verify and during extract.

A kill can land anywhere: the final path must never hold a partial or unverified file,
the recorded state must describe bytes really on disk, and the next plain
`prefetch get` must end with the identical file and nothing else left behind (no
``.part``, no state temp files, no half-written extraction directories).

(tests/test_jobs_kill.py kills the *background* worker at fixed points; these kill the
foreground process, at random points drawn from fixed seeds.)
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from prefetch.engine.resume_state import TransferState, save_state
from tests.archives import tar_gz
from tests.conftest import run_cli
from tests.helpers import start_cli, write_registry
from tests.origin import OriginServer
from tests.test_faults import recorded_bytes

KILL_SEEDS = [11, 12, 13]
KILLS_PER_SEED = 3


# --------------------------------------------------------------------------- helpers


class Running:
    """A `prefetch get` subprocess whose stderr lines are read as they come."""

    def __init__(self, *args: str) -> None:
        self.proc = start_cli(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)

    def wait_for_line(self, needle: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no stderr line with {needle!r}; got {self.seen}")

    def kill(self) -> int:
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.proc.wait(30)


def wait_until(condition, *, timeout: float = 60.0, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.002)
    raise AssertionError(f"timed out waiting for {what}")


def strays(directory: Path, allowed: set[str]) -> list[str]:
    """Files or dirs under ``directory`` that are neither expected results nor their contents."""
    found = []
    for path in directory.iterdir():
        if path.name not in allowed:
            found.append(path.name)
    return sorted(found)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- mid-body kills


@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_sigkill_at_random_offsets_then_resume(home, tmp_path, seed):
    rng = random.Random(seed)
    data = rng.randbytes(rng.randrange(1 << 20, 3 << 20))
    sha = hashlib.sha256(data).hexdigest()
    out = tmp_path / "dl" / f"killed {seed} ü.bin"
    out.parent.mkdir()
    offsets = sorted(rng.randrange(1, len(data)) for _ in range(KILLS_PER_SEED))
    with OriginServer() as origin:
        origin.put("big.bin", data)
        origin.rate = rng.choice([1_500_000, 3_000_000])  # per connection: slow enough to aim
        args = ["get", origin.url_for("big.bin"), "-o", str(out), "--sha256", sha, "-q",
                "--connections", str(rng.choice([1, 2, 4]))]
        recorded = 0
        for offset in offsets:
            sent_before = origin.bytes_sent
            run = Running(*args)
            # Kill once the server has sent ``offset`` more bytes in this run (or the run ends).
            wait_until(lambda: origin.bytes_sent - sent_before >= offset - recorded or run.proc.poll() is not None,
                       what=f"byte {offset}")
            code = run.kill()
            if code == 0:
                break  # finished before the kill: nothing more to interrupt
            assert code == -signal.SIGKILL
            assert not out.exists(), "a killed run left a file at the final path"
            assert Path(f"{out}.part").exists()
            recorded = recorded_bytes(out, [data])  # recorded bytes are the real bytes
        origin.rate = None
        done_before = recorded_bytes(out, [data])
        final = run_cli(*args, "--json", timeout=60)
    assert final.returncode == 0, final.stderr
    assert out.read_bytes() == data
    (result,) = json.loads(final.stdout)
    assert result["verified"] and result["reused"] == done_before
    assert strays(out.parent, {out.name}) == []


def test_a_state_temp_file_left_by_a_kill_mid_write_is_removed_on_resume(home, tmp_path):
    """A SIGKILL between writing the state's temp file and renaming it leaves
    ``.NAME.part.json.PID-XXXX.tmp`` (prefetch.fs.files.replace_file's name): the next run removes it."""
    data = os.urandom(300_000)
    out = tmp_path / "dl" / "f.bin"
    out.parent.mkdir()
    stray = out.parent / f".{out.name}.part.json.999999-0badc0de.tmp"
    stray.write_text("{half a state")
    with OriginServer() as origin:
        origin.put("f.bin", data)
        proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert strays(out.parent, {out.name}) == []


# --------------------------------------------------------------------------- verify


@pytest.mark.parametrize("seed", [21, 22])
def test_sigkill_while_verifying_a_complete_part_then_resume(home, tmp_path, seed):
    """A run killed after the last byte but before the rename leaves a complete .part; the next
    run hashes it all again. Kill that run while it hashes: still nothing at the final path."""
    rng = random.Random(seed)
    data = rng.randbytes(1 << 20) * 96  # md5 of 96 MiB: a verify phase long enough to aim at
    md5 = hashlib.md5(data).hexdigest()
    out = tmp_path / "verify.bin"
    with OriginServer() as origin:
        url = origin.url_for("verify.bin")
        origin.put("verify.bin", data)
        part, state = Path(f"{out}.part"), Path(f"{out}.part.json")
        part.write_bytes(data)
        save_state(state, TransferState(urls=[url], size=len(data), done=[[0, len(data)]], algorithm="md5"))
        args = ["get", url, "-o", str(out), "--md5", md5]
        killed_while_verifying = 0
        for _ in range(6):
            run = Running(*args)
            run.wait_for_line(" start ")  # the transfer found everything on disk: hashing now
            time.sleep(rng.uniform(0.0, 0.06))
            code = run.kill()
            if code == -signal.SIGKILL and not out.exists():
                killed_while_verifying += 1
                assert part.read_bytes() == data and state.exists()
            if out.exists():
                break
        assert killed_while_verifying >= 1
        assert origin.data_requests("verify.bin") == []  # a complete .part is never fetched again
        final = run_cli(*args, "-q", timeout=60)
    assert final.returncode == 0, final.stderr
    assert hashlib.md5(out.read_bytes()).hexdigest() == md5
    assert strays(out.parent, {out.name, "home"}) == []


# --------------------------------------------------------------------------- extract


def make_archive(members: int) -> tuple[bytes, dict[str, bytes]]:
    files = {f"pkg/d{i % 25}/f{i}.txt": (f"member {i}\n" * 24).encode() for i in range(members)}
    return tar_gz(files), files


@pytest.mark.parametrize("seed", [31, 32])
def test_sigkill_during_extract_then_resume(home, tmp_path, seed):
    rng = random.Random(seed)
    archive, files = make_archive(4000)
    sha = hashlib.sha256(archive).hexdigest()
    datasets = home / ".keras" / "datasets"
    with OriginServer() as origin:
        origin.put("pkg.tar.gz", archive)
        registry = write_registry(tmp_path / "registry.toml", "pkgset", origin.url_for("pkg.tar.gz"), sha256=sha,
                                  extract=["unpacked"])
        args = ["get", "pkgset", "--registry", str(registry)]
        run = Running(*args)
        run.wait_for_line("extracting into")
        time.sleep(rng.uniform(0.0, 0.15))
        code = run.kill()
        assert code == -signal.SIGKILL, "the extraction finished before the kill; use more members"
        # Keras takes the archive's presence as "done": it must not be there yet.
        assert not (datasets / "pkg.tar.gz").exists()
        assert not (datasets / "unpacked").exists() or _complete(datasets / "unpacked", files)
        sent = origin.bytes_sent
        final = run_cli(*args, "-q", timeout=60)
        assert origin.bytes_sent == sent  # the verified .part was extracted again, not fetched again
    assert final.returncode == 0, final.stderr
    assert sha256_of(datasets / "pkg.tar.gz") == sha
    assert _complete(datasets / "unpacked", files)
    assert strays(datasets, {"pkg.tar.gz", "unpacked"}) == [], "a killed extraction left temp files behind"


def _complete(root: Path, files: dict[str, bytes]) -> bool:
    found = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}
    return set(found) == set(files) and all(found[n].read_bytes() == data for n, data in files.items())
