"""Transfer: resume after broken connections and killed processes, restarts, 416, hashes.

In-process tests call ``download_to_part`` (one connection where the exact byte
accounting matters); end-to-end tests run the real CLI as a subprocess against the
local origin (``tests/origin.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest

from prefetch.model.events import EventKind
from prefetch.net.http import Timeouts
from prefetch.engine.ranges import RangeSet
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from prefetch.engine.resume_state import load_state
from tests.conftest import run_cli
from tests.helpers import sigkill_when, start_cli
from tests.origin import (
    ChangeContent,
    CloseAfter,
    OriginServer,
    StallAfter,
    Status,
    WrongBytes,
)

MiB = 1 << 20
KiB = 1 << 10


def payload(size: int, seed: int) -> bytes:
    """Random bytes: any misplaced or stitched byte range changes the content."""
    return random.Random(seed).randbytes(size)


def fast_options(**overrides) -> TransferOptions:
    """Quick retries for loopback; the defaults are for real networks."""
    values = dict(backoff_base=0.01, backoff_cap=0.05, retry_after_cap=0.2, timeouts=Timeouts(connect=3, read=3))
    values.update(overrides)
    return TransferOptions(**values)


class Events(list):
    """An event sink that keeps everything."""

    def __call__(self, event) -> None:
        self.append(event)

    def notes(self) -> list[str]:
        return [e.message for e in self if e.kind is EventKind.NOTE]


def download(origin: OriginServer, name: str, tmp_path: Path, **options):
    events = Events()
    part, state = tmp_path / f"{name}.part", tmp_path / f"{name}.part.json"
    result = download_to_part(
        urls=[origin.url_for(name)],
        part=part,
        state_file=state,
        algorithm="sha256",
        options=fast_options(**options),
        on_event=events,
    )
    return result, part.read_bytes(), events


def env_with(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env.update(extra)
    return env


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def partial_attempt(origin: OriginServer, name: str, out: Path, *, close_after: int) -> dict:
    """A first `prefetch get URL -o out` that the server cuts at ``close_after`` bytes.

    ``PREFETCH_RETRIES=0`` makes it give up at once (exit 3) and leave ``.part`` and its
    state for the next attempt. Returns the saved state (JSON).
    """
    origin.add_fault(CloseAfter(close_after, path=name))
    first = run_cli("get", origin.url_for(name), "-o", str(out), "--connections", "1",
                    env=env_with(PREFETCH_RETRIES="0"))
    assert first.returncode == 3, first.stderr
    assert not out.exists()
    state_file = out.with_name(out.name + ".part.json")
    state = json.loads(state_file.read_text())
    assert RangeSet(state["done"]).total() == close_after
    return state


# --------------------------------------------------------------------------- broken connections


def test_resume_after_server_closes_mid_body_continues_at_the_byte(origin, tmp_path):
    data = payload(3 * MiB, 1)
    origin.put("f.bin", data)
    origin.add_fault(CloseAfter(1_000_000, path="f.bin"))

    result, got, events = download(origin, "f.bin", tmp_path, connections=1)

    assert got == data
    assert result.digest == hashlib.sha256(data).hexdigest()
    first, second = origin.data_requests("f.bin")
    assert first.range == "bytes=0-" and first.body_bytes_sent == 1_000_000
    # The retry asks for exactly the missing bytes, guarded by the validator.
    assert second.range == f"bytes=1000000-{len(data) - 1}"
    assert second.headers["If-Range"] == origin.etag("f.bin")
    assert second.status == 206
    assert origin.bytes_sent == len(data)  # not one byte sent twice
    assert any("connection" in n and "retry 1/" in n for n in events.notes())


def test_resume_after_connection_reset_mid_body(origin, tmp_path):
    data = payload(2 * MiB, 2)
    origin.put("f.bin", data)
    origin.add_fault(CloseAfter(700_000, reset=True, path="f.bin"))

    result, got, _ = download(origin, "f.bin", tmp_path, connections=1)

    assert got == data
    assert result.digest == hashlib.sha256(data).hexdigest()
    requests = origin.data_requests("f.bin")
    assert len(requests) == 2
    # A reset may lose what was still in the kernel's buffers, never more.
    assert origin.bytes_sent <= len(data) + 700_000


def test_cli_resumes_after_close_and_prints_the_final_path(origin, home, tmp_path):
    data = payload(2 * MiB, 3)
    origin.put("data.bin", data)
    origin.add_fault(CloseAfter(500_000, path="data.bin"))
    out = tmp_path / "out" / "data.bin"

    proc = run_cli("get", origin.url_for("data.bin"), "-o", str(out))

    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert f"downloaded {out}" in proc.stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ["data.bin"]  # no .part, no state left
    later = origin.data_requests("data.bin")[1:]
    # Every request after the first starts past byte 0 and is guarded by the ETag.
    assert later and all(r.headers.get("If-Range") == origin.etag("data.bin") for r in later)
    assert all(not r.range.startswith("bytes=0-") for r in later)


def test_stall_below_minimum_speed_reconnects_and_resumes(origin, tmp_path):
    data = payload(400 * KiB, 4)
    origin.put("slow.bin", data)
    origin.rate = 8 * KiB  # a trickle, far below the minimum speed below

    def lift_throttle_on_reconnect() -> None:
        deadline = time.monotonic() + 20
        while len(origin.data_requests("slow.bin")) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        origin.rate = None

    watcher = threading.Thread(target=lift_throttle_on_reconnect, daemon=True)
    watcher.start()
    result, got, events = download(
        origin, "slow.bin", tmp_path, connections=1, stall_window=0.5, stall_min_rate=64 * KiB
    )
    watcher.join()

    assert got == data
    assert any("stalled below" in n for n in events.notes())
    first, second = origin.data_requests("slow.bin")[:2]
    # The reconnect resumed where the trickle stopped, not from 0.
    resumed_at = int(second.range[len("bytes="):].split("-")[0])
    assert 0 < resumed_at <= first.body_bytes_sent


def test_silent_stall_hits_the_read_timeout_and_resumes(origin, tmp_path):
    data = payload(1 * MiB, 5)
    origin.put("f.bin", data)
    origin.add_fault(StallAfter(300_000, seconds=30, path="f.bin"))

    result, got, events = download(origin, "f.bin", tmp_path, connections=1, timeouts=Timeouts(connect=3, read=0.5))

    assert got == data
    assert any("timed out" in n for n in events.notes())
    assert origin.data_requests("f.bin")[1].range == f"bytes=300000-{len(data) - 1}"


def test_transient_503_with_retry_after_is_retried(origin, tmp_path):
    data = payload(100 * KiB, 6)
    origin.put("f.bin", data)
    origin.add_fault(Status(503, retry_after=1, path="f.bin"))

    _, got, events = download(origin, "f.bin", tmp_path)

    assert got == data
    assert [r.status for r in origin.data_requests("f.bin")] == [503, 206]
    assert any("HTTP 503" in n and "retry 1/" in n for n in events.notes())


def test_404_is_final_exit_3_without_retries(origin, home, tmp_path):
    out = tmp_path / "missing.bin"

    proc = run_cli("get", origin.url_for("missing.bin"), "-o", str(out))

    assert proc.returncode == 3
    assert len(origin.data_requests("missing.bin")) == 1  # no retry for a 404
    assert len(error_lines(proc.stderr)) == 1 and "404" in proc.stderr
    # Nothing was downloaded, so nothing is left to resume: no .part, no state file.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


# --------------------------------------------------------------------------- killed process


def test_resume_across_processes_after_sigkill(origin, home, tmp_path):
    """A `prefetch get` killed with SIGKILL continues from its state file on the next run.

    Bound on the bytes sent twice. What the killed process loses is what the server
    sent on each connection but the last saved state does not record:
      * bytes written to .part after the last state save: the main loop saves every
        ``state_interval`` (0.5 s) and wakes at least every 0.05 s, so at most
        ``rate * (state_interval + slack)`` per connection, with 1 s of slack for a busy
        2-core machine;
      * bytes read but not yet written, what sits in socket buffers, and the piece the
        server counted before its write failed: at most one read, ``chunk_size``, per
        connection (the throttled server sends ``rate/10`` pieces and then waits).
    So ``duplicated <= connections * (chunk_size + rate * (state_interval + 1 s))``.
    A resume that restarted from 0 would instead resend everything recorded.
    """
    defaults = TransferOptions()
    connections, rate = 2, 256 * KiB
    per_connection_loss = defaults.chunk_size + rate * (defaults.state_interval + 1.0)
    data = payload(4 * MiB, 7)
    origin.put("big.bin", data)
    origin.rate = rate  # per connection
    out = tmp_path / "big.bin"
    state_file = tmp_path / "big.bin.part.json"
    log = tmp_path / "first.log"
    with open(log, "wb") as sink:
        first = start_cli("get", origin.url_for("big.bin"), "-o", str(out), "--connections", str(connections),
                          stdout=sink, stderr=subprocess.STDOUT)

    def recorded_1_mib() -> bool:
        state = load_state(state_file)
        return state is not None and RangeSet(state.done).total() >= 1 * MiB

    sigkill_when(first, recorded_1_mib, what="1 MiB recorded", details=log.read_text)
    assert not out.exists()

    # Let the server notice the dead connections before counting.
    deadline = time.monotonic() + 10
    while origin.open_connections and time.monotonic() < deadline:
        time.sleep(0.02)
    first_requests = len(origin.requests)
    sent_before = origin.bytes_sent
    state = load_state(state_file)
    recorded = RangeSet(state.done)
    assert recorded.total() >= 1 * MiB and state.size == len(data)
    # Nothing is recorded that is not really in .part.
    part = (tmp_path / "big.bin.part").read_bytes()
    assert all(part[a:b] == data[a:b] for a, b in recorded.as_list())

    origin.rate = None
    # One connection for the second run: with several, splitting a segment leaves the
    # server streaming the old range's tail into socket buffers, which would blur the
    # exact accounting below (that overlap is not caused by the kill).
    second = run_cli("get", origin.url_for("big.bin"), "-o", str(out), "--connections", "1")

    assert second.returncode == 0, second.stderr
    assert out.read_bytes() == data
    assert "resuming" in second.stderr
    later = origin.requests[first_requests:]
    # Without a hash, the kept bytes are first sampled against the origin (engine/resume_check.py):
    # at most three windows of 16 KiB, inside what is recorded.
    from prefetch.engine.resume_check import WINDOW, sample_windows

    windows = [f"bytes={a}-{b - 1}" for a, b in sample_windows(recorded.as_list())]
    samples = [r for r in later if r.range in windows]
    assert len(samples) == len(windows) <= 3 and all(r.body_bytes_sent <= WINDOW for r in samples)
    later = [r for r in later if r not in samples]
    # The second run asked only for what the state says is missing ...
    for r in later:
        lo, hi = (int(x) for x in r.range[len("bytes="):].split("-"))
        assert r.headers["If-Range"] == origin.etag("big.bin")
        for a, b in recorded.as_list():
            assert hi < a or lo >= b, f"{r.range} re-requests recorded bytes {a}-{b}"
    sent_after = sum(r.body_bytes_sent for r in later)
    assert sent_after == len(data) - recorded.total()
    # ... and the killed run lost only what was in flight.
    duplicated = sent_before - recorded.total()
    assert 0 <= duplicated <= connections * per_connection_loss
    assert sent_before + sent_after <= len(data) + connections * per_connection_loss


# --------------------------------------------------------------------------- the remote changed


@pytest.mark.parametrize(("validator", "connections"), [("etag", "1"), ("last_modified", "1"), ("etag", None)])
def test_remote_changed_between_attempts_restarts_never_stitches(origin, home, tmp_path, validator, connections):
    old, new = payload(2 * MiB, 8), payload(2 * MiB, 9)  # same size: only the validator tells
    origin.send_etag = validator == "etag"
    origin.put("f.bin", old)
    out = tmp_path / "f.bin"
    state = partial_attempt(origin, "f.bin", out, close_after=800_000)
    saved = state["validators"][origin.url_for("f.bin")]
    assert (saved.get("etag") if validator == "etag" else saved.get("last_modified"))
    before = len(origin.requests)

    origin.put("f.bin", new)  # new ETag and a later Last-Modified
    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), *(["--connections", connections] if connections else []))

    assert proc.returncode == 0, proc.stderr
    got = out.read_bytes()
    assert got == new
    assert got[:800_000] != old[:800_000]  # not old bytes + new tail
    assert "changed" in proc.stderr and "restarting from 0" in proc.stderr
    # Every resumed request was guarded by the old validator, which failed: the server
    # answered 200 (the whole new file) and the client started over.
    expected_if_range = saved["etag"] if validator == "etag" else saved["last_modified"]
    resumed = [r for r in origin.requests[before:] if r.headers.get("If-Range") == expected_if_range]
    assert resumed and all(r.status == 200 for r in resumed)
    assert origin.requests[before].headers.get("If-Range") == expected_if_range


def test_remote_changed_during_a_run_restarts_from_zero(origin, tmp_path):
    old, new = payload(2 * MiB, 10), payload(2 * MiB, 11)
    origin.put("f.bin", old)
    origin.add_fault(CloseAfter(900_000, path="f.bin"))
    origin.add_fault(ChangeContent(new, path="f.bin"))  # applied to the resuming request

    result, got, events = download(origin, "f.bin", tmp_path, connections=1)

    assert got == new
    assert result.digest == hashlib.sha256(new).hexdigest()
    assert result.restarts == 1
    assert any("changed" in n for n in events.notes())


@pytest.mark.parametrize("connections", ["1", None])
def test_server_ignoring_range_restarts_cleanly_from_zero(origin, home, tmp_path, connections):
    data = payload(2 * MiB, 12)
    origin.put("f.bin", data)
    out = tmp_path / "f.bin"
    partial_attempt(origin, "f.bin", out, close_after=600_000)
    before = len(origin.requests)

    origin.ignore_range = True
    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), *(["--connections", connections] if connections else []))

    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert "ignored Range" in proc.stderr and "restarting from 0" in proc.stderr
    later = origin.requests[before:]
    # The first request samples the kept bytes (no hash: engine/resume_check.py), and is answered 200.
    assert later[0].range == "bytes=0-16383"
    assert later[0].range is not None and later[0].status == 200
    # The clean restart: one plain GET for the whole file.
    assert later[-1].range is None and later[-1].status == 200
    assert later[-1].body_bytes_sent == len(data)


def test_no_range_server_with_a_broken_connection_starts_over(origin, tmp_path):
    data = payload(1 * MiB, 13)
    origin.put("f.bin", data)
    origin.ignore_range = True
    origin.add_fault(CloseAfter(300_000, path="f.bin"))

    result, got, events = download(origin, "f.bin", tmp_path)

    assert got == data
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert any("restarting from 0" in n for n in events.notes())


def test_partial_without_validators_is_not_resumed_unguarded(origin, home, tmp_path):
    """No ETag, no Last-Modified, no expected hash: nothing could detect a changed file,
    so the next run starts over instead of stitching (what wget -c would do)."""
    old, new = payload(2 * MiB, 19), payload(2 * MiB, 20)
    origin.send_etag = origin.send_last_modified = False
    origin.put("f.bin", old)
    out = tmp_path / "f.bin"
    state = partial_attempt(origin, "f.bin", out, close_after=800_000)
    assert not any(state["validators"].values())
    before = len(origin.requests)

    origin.put("f.bin", new)
    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), "--connections", "1")

    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == new
    assert "starting over" in proc.stderr
    assert origin.requests[before].range == "bytes=0-"


def test_partial_without_validators_is_resumed_when_a_hash_guards_it(origin, home, tmp_path):
    data = payload(2 * MiB, 21)
    digest = hashlib.sha256(data).hexdigest()
    origin.send_etag = origin.send_last_modified = False
    origin.put("f.bin", data)
    out = tmp_path / "f.bin"
    origin.add_fault(CloseAfter(800_000, path="f.bin"))
    first = run_cli("get", origin.url_for("f.bin"), "-o", str(out), "--connections", "1", "--sha256", digest,
                    env=env_with(PREFETCH_RETRIES="0"))
    assert first.returncode == 3
    before = len(origin.requests)

    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), "--connections", "1", "--sha256", digest)

    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert origin.requests[before].range == f"bytes=800000-{len(data) - 1}"
    assert "If-Range" not in origin.requests[before].headers  # nothing to send; the hash decides


# --------------------------------------------------------------------------- 416


def test_empty_remote_file_answers_416_and_gives_an_empty_file(origin, home, tmp_path):
    origin.put("empty.bin", b"")
    out = tmp_path / "empty.bin"

    proc = run_cli("get", origin.url_for("empty.bin"), "-o", str(out),
                   "--sha256", hashlib.sha256(b"").hexdigest())

    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == b""
    assert origin.data_requests("empty.bin")[0].status == 416
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.bin", "home"]


def test_a_spurious_416_for_the_known_size_is_retried(origin, tmp_path):
    data = payload(1 * MiB, 14)
    origin.put("f.bin", data)
    origin.add_fault(CloseAfter(400_000, path="f.bin"))
    origin.add_fault(Status(416, path="f.bin"))  # Content-Range: bytes */<same size>

    _, got, events = download(origin, "f.bin", tmp_path, connections=1)

    assert got == data
    assert [r.status for r in origin.data_requests("f.bin")] == [206, 416, 206]
    assert any("416" in n for n in events.notes())


def test_416_naming_a_new_size_restarts_with_the_new_file(origin, home, tmp_path):
    old, new = payload(2 * MiB, 15), payload(500_000, 16)
    origin.put("f.bin", old)
    out = tmp_path / "f.bin"
    partial_attempt(origin, "f.bin", out, close_after=1_000_000)

    # The file shrank below our offset; this server checks Range before If-Range.
    origin.put("f.bin", new)
    origin.add_fault(Status(416, path="f.bin"))
    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), "--connections", "1")

    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == new
    assert "size changed from 2097152 to 500000" in proc.stderr
    assert [r.status for r in origin.data_requests("f.bin")[-2:]] == [416, 206]


# --------------------------------------------------------------------------- hash mismatch


@pytest.mark.parametrize("algorithm", ["sha256", "md5"])
def test_hash_mismatch_exits_4_and_leaves_nothing(origin, home, tmp_path, algorithm):
    data = payload(300 * KiB, 17)
    origin.put("f.bin", data)
    wrong = hashlib.new(algorithm, b"something else").hexdigest()
    out = tmp_path / "out" / "f.bin"

    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), f"--{algorithm}", wrong)

    assert proc.returncode == 4
    assert not out.exists()
    # fetch.py discards the .part and its state on a mismatch: a retry starts clean (and the
    # folder the run made, left empty, goes too)
    assert not out.parent.exists()
    errors = error_lines(proc.stderr)
    assert len(errors) == 1
    assert f"expected {wrong}" in errors[0]
    assert f"got {hashlib.new(algorithm, data).hexdigest()}" in errors[0]
    assert "f.bin" in errors[0]


def test_corrupted_bytes_from_the_server_fail_the_hash(origin, home, tmp_path):
    data = payload(300 * KiB, 18)
    origin.put("f.bin", data)
    origin.add_fault(WrongBytes(path="f.bin"))
    out = tmp_path / "f.bin"

    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(out), "--sha256", hashlib.sha256(data).hexdigest())

    assert proc.returncode == 4
    assert not out.exists()
    assert len(error_lines(proc.stderr)) == 1 and "mismatch" in proc.stderr

    # The next run starts clean and gets the right file.
    again = run_cli("get", origin.url_for("f.bin"), "-o", str(out), "--sha256", hashlib.sha256(data).hexdigest())
    assert again.returncode == 0, again.stderr
    assert out.read_bytes() == data
