"""Targeted faults, one test per kind: every `get` ends with the verified file or a clean, resumable failure.

Each test drives the real download flow in-process (``run_request``, the function the CLI
and the background worker call) against the fault-injecting origin in ``tests/origin.py``,
then checks the guarantee of issue 6:

* success: the file at the final path is byte-identical to the origin's and verified,
  and nothing else (no ``.part``, no state file, no temp file) is left beside it;
* failure: a documented exit code, a one-line message without a traceback, nothing at
  the final path, and a ``.part`` + state whose recorded bytes are the origin's bytes —
  so that a later clean run resumes (reusing them) to the identical file.

The helpers at the top are shared with the randomized suite (``test_faults_random.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from prefetch.model.plans import FileResult
from prefetch.flow.request import GetRequest
from prefetch.flow.planning import run_request
from prefetch.engine.resume_state import load_state
from tests.origin import (
    ChangeContent,
    CloseAfter,
    Delay,
    Gzip,
    IgnoreRange,
    LongContentLength,
    OriginServer,
    Redirect,
    SilentServer,
    StallAfter,
    Status,
    WrongBytes,
    WrongContentRange,
    http_date,
)

# Exit codes a failed `get` may end with (README "Exit codes"); 1, 2 and 6 are not
# network/transfer outcomes.
FAILURE_CODES = {ExitCode.NETWORK, ExitCode.INTEGRITY, ExitCode.FILESYSTEM, ExitCode.INTERRUPTED}
NAME = "data.bin"
SIZE = 256 << 10
DATA = random.Random(6).randbytes(SIZE)
SHA = hashlib.sha256(DATA).hexdigest()


# --------------------------------------------------------------------------- helpers


def fault_env(**overrides: str | int | float) -> dict[str, str]:
    """os.environ (already isolated by the ``home`` fixture) plus small, fast knobs."""
    env = dict(os.environ)
    env.update(
        PREFETCH_MIN_SPLIT="16384",
        PREFETCH_READ_TIMEOUT="0.5",
        PREFETCH_CONNECT_TIMEOUT="1",
        PREFETCH_BACKOFF="0.02",
        PREFETCH_BACKOFF_CAP="0.1",
    )
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def get_file(url: str, out: Path, *, env: dict[str, str], sha256: str | None = None, md5: str | None = None,
             connections: int | None = None, stop: threading.Event | None = None, events: list | None = None,
             mirrors: list[str] = (), also_origin: bool = False, deadline: float = 60.0) -> FileResult:
    """``prefetch get URL -o OUT`` in-process; fails the test if it hangs past ``deadline``."""
    request = GetRequest(names=[url], output=str(out), sha256=sha256, md5=md5, connections=connections,
                         mirrors=list(mirrors), also_origin=also_origin)
    stop = stop or threading.Event()
    box: dict = {}

    def target() -> None:
        try:
            box["results"] = run_request(request, env=env, stop=stop,
                                         on_event=events.append if events is not None else lambda e: None)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(deadline)
    if thread.is_alive():
        stop.set()
        thread.join(10)
        pytest.fail(f"prefetch get {url} hung for more than {deadline:.0f}s")
    if "error" in box:
        raise box["error"]  # a non-PrefetchError escaped: a bug (it would be a traceback)
    (result,) = box["results"]
    return result


def leftovers(out: Path) -> list[str]:
    """Names beside ``out`` other than ``out`` itself and its ``.part``/state pair."""
    keep = {out.name, out.name + ".part", out.name + ".part.json"}
    return sorted(p.name for p in out.parent.iterdir() if p.name not in keep)


def assert_success(result: FileResult, out: Path, data: bytes, *, verified: bool = True) -> None:
    """The final path holds exactly ``data``, verified; nothing else is left over."""
    assert result.status in ("downloaded", "cached"), result.error
    assert result.exit_code == 0
    assert out.read_bytes() == data
    if verified:
        assert result.verified
        assert result.digest == hashlib.new(result.algorithm, data).hexdigest()
    assert not Path(str(out) + ".part").exists()
    assert not Path(str(out) + ".part.json").exists()
    assert leftovers(out) == []


def assert_clean_failure(result: FileResult, out: Path, versions: list[bytes] | None = None,
                         codes: set[int] = FAILURE_CODES) -> int:
    """A documented exit code, one clear line, nothing at the final path, trustworthy state.

    Returns the number of bytes the saved state records as done (0 if none).
    """
    assert result.status in ("failed", "interrupted"), result
    assert result.exit_code in codes, (result.exit_code, result.error)
    message = result.error or ""
    assert message.strip(), "empty error message"
    assert "\n" not in message and "Traceback" not in message, message
    assert not out.exists(), f"{out} exists after a failed get"
    assert leftovers(out) == [], leftovers(out)
    return recorded_bytes(out, versions or [])


def recorded_bytes(out: Path, versions: list[bytes]) -> int:
    """Bytes the state file says are on disk; checks they are one version's real bytes."""
    part, state_file = Path(str(out) + ".part"), Path(str(out) + ".part.json")
    if not state_file.exists():
        return 0
    state = load_state(state_file)
    assert state is not None, f"unreadable state file: {state_file.read_text()!r}"
    if not state.done:
        return 0
    assert part.exists(), "state records bytes but the .part is gone"
    on_disk = part.read_bytes()
    spans = [(a, b) for a, b in state.done]
    if versions:
        # Only the bytes count: the recorded size may be a server's lie (a long Content-Length),
        # which the next run detects (416 / a size mismatch) and starts over from.
        matching = [v for v in versions if all(b <= len(v) and on_disk[a:b] == v[a:b] for a, b in spans)]
        assert matching, f"the bytes recorded as done ({spans}) are not the bytes of any version of the file"
    return sum(b - a for a, b in spans)


def notes(events: list) -> str:
    return "\n".join(e.message for e in events if getattr(e, "message", None))


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put(NAME, DATA)
        yield server


@pytest.fixture
def out(home, tmp_path) -> Path:
    target = tmp_path / "out"
    target.mkdir()
    return target / NAME


def fetch_clean(origin: OriginServer, out: Path, *, env=None, sha256: str | None = SHA, data: bytes = DATA,
                reused: int | None = None) -> FileResult:
    """A later run with the faults gone: it must end with the identical file."""
    result = get_file(origin.url_for(NAME), out, env=env or fault_env(), sha256=sha256)
    assert_success(result, out, data, verified=sha256 is not None)
    if reused is not None:
        assert result.reused == reused, "the clean run did not resume from the bytes on disk"
    return result


# --------------------------------------------------------------------------- drops


def test_close_after_n_bytes_resumes_where_it_broke(origin, out):
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(CloseAfter(50_000, path=NAME, reset=True))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1)
    assert_success(result, out, DATA)
    ranges = [r.range for r in origin.data_requests(NAME)]
    assert ranges[0] == "bytes=0-"
    assert ranges[1] == f"bytes=100000-{SIZE - 1}" and ranges[2] == f"bytes=150000-{SIZE - 1}"
    assert result.downloaded == SIZE  # nothing fetched twice
    resumed = origin.data_requests(NAME)[1]
    assert resumed.headers.get("If-Range") == origin.etag(NAME)


def test_drops_until_retries_run_out_leave_resumable_state(origin, out):
    for n in (40_000, 0, 0, 0, 0):
        origin.add_fault(CloseAfter(n, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_RETRIES=2), sha256=SHA, connections=1)
    done = assert_clean_failure(result, out, [DATA], codes={ExitCode.NETWORK})
    assert "gave up" in result.error and "again to resume" in result.error
    assert done >= 40_000
    fetch_clean(origin, out, reused=done)


# --------------------------------------------------------------------------- stalls


def test_stall_mid_body_times_out_and_resumes(origin, out):
    origin.add_fault(StallAfter(70_000, 3.0, path=NAME))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_READ_TIMEOUT="0.3"), sha256=SHA,
                      connections=1, events=events)
    assert_success(result, out, DATA)
    assert "timed out" in notes(events)
    assert origin.data_requests(NAME)[1].range == f"bytes=70000-{SIZE - 1}"


def test_trickle_below_the_minimum_rate_is_reconnected(origin, out):
    small = DATA[: 48 << 10]
    origin.put("slow.bin", small)
    origin.rate = 40_000  # bytes/s per response
    target = out.with_name("slow.bin")
    env = fault_env(PREFETCH_STALL_WINDOW="0.3", PREFETCH_STALL_MIN_RATE="200000")
    events: list = []
    result = get_file(origin.url_for("slow.bin"), target, env=env, sha256=hashlib.sha256(small).hexdigest(),
                      connections=1, events=events)
    assert_success(result, target, small)
    assert "stalled below" in notes(events)
    assert len(origin.data_requests("slow.bin")) >= 2


def test_slow_first_byte_beyond_the_read_timeout_is_retried(origin, out):
    origin.add_fault(Delay(1.5, path=NAME))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_READ_TIMEOUT="0.3"), sha256=SHA,
                      events=events)
    assert_success(result, out, DATA)
    assert "timed out" in notes(events).lower()


def test_silent_server_gives_up_with_exit_3(out):
    with SilentServer() as silent:
        target = out
        result = get_file(silent.url_for("x.bin"), target, env=fault_env(PREFETCH_READ_TIMEOUT="0.2", PREFETCH_RETRIES=1),
                          sha256=SHA)
    assert_clean_failure(result, target, codes={ExitCode.NETWORK})
    assert "timed out" in result.error.lower()


def test_connection_refused_gives_exit_3(out):
    with OriginServer() as gone:
        url = gone.url_for("x.bin")
    target = out
    result = get_file(url, target, env=fault_env(PREFETCH_RETRIES=1), sha256=SHA)
    assert_clean_failure(result, target, codes={ExitCode.NETWORK})


# --------------------------------------------------------------------------- statuses


@pytest.mark.parametrize("code", [500, 503])
def test_5xx_burst_with_retry_after_is_waited_out(origin, out, code):
    origin.add_fault(CloseAfter(30_000, path=NAME))
    for _ in range(3):
        origin.add_fault(Status(code, retry_after=1, path=NAME))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_RETRY_AFTER_CAP="0.3"), sha256=SHA,
                      connections=1, events=events)
    assert_success(result, out, DATA)
    text = notes(events)
    assert text.count(f"answered HTTP {code}") == 3
    # Retry-After (1s, capped to 0.3s here) beats the 0.02s backoff: every wait is the cap.
    assert text.count("in 0.3s") == 3, text


def test_429_with_an_http_date_retry_after(origin, out):
    import time

    origin.add_fault(Status(429, retry_after=http_date(time.time() + 30), path=NAME))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_RETRY_AFTER_CAP="0.3"), sha256=SHA,
                      events=events)
    assert_success(result, out, DATA)
    assert "answered HTTP 429; retry 1/8 in 0.3s" in notes(events)


def test_503_without_end_gives_up_resumably(origin, out):
    origin.add_fault(CloseAfter(60_000, path=NAME))
    for _ in range(6):
        origin.add_fault(Status(503, retry_after=0, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_RETRIES=3), sha256=SHA, connections=1)
    done = assert_clean_failure(result, out, [DATA], codes={ExitCode.NETWORK})
    assert "HTTP 503" in result.error
    fetch_clean(origin, out, reused=done)


def test_404_is_final_and_not_retried(origin, out):
    result = get_file(origin.url_for("missing.bin"), out, env=fault_env(), sha256=SHA)
    assert_clean_failure(result, out, codes={ExitCode.NETWORK})
    assert "404" in result.error and "missing.bin" in result.error
    assert len(origin.data_requests("missing.bin")) == 1


def test_416_for_a_range_inside_the_file_is_retried(origin, out):
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(Status(416, path=NAME, only_ranged=True))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1)
    assert_success(result, out, DATA)
    assert [r.status for r in origin.data_requests(NAME)][:2] == [206, 416]


def test_416_naming_another_size_restarts_from_zero(origin, out):
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(Status(416, path=NAME, only_ranged=True, headers={"Content-Range": "bytes */1000"}))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1, events=events)
    assert_success(result, out, DATA)
    assert "size changed" in notes(events)


# --------------------------------------------------------------------------- lies


def test_ignored_range_on_resume_restarts_cleanly(origin, out):
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(IgnoreRange(path=NAME))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, events=events)
    assert_success(result, out, DATA)
    assert "ignored Range" in notes(events)


def test_server_that_never_honours_range_still_gives_the_file(origin, out):
    origin.ignore_range = True
    origin.add_fault(CloseAfter(100_000, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA)
    assert_success(result, out, DATA)
    assert all(r.status == 200 for r in origin.data_requests(NAME))


def test_wrong_content_range_is_refused(origin, out):
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(WrongContentRange(shift=7, path=NAME, only_ranged=True))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1, events=events)
    assert_success(result, out, DATA)
    assert "does not match the request" in notes(events)


def test_wrong_content_range_without_a_hash_never_stitches(origin, out):
    # No hash to catch it: the Content-Range check alone must keep the bytes right.
    for _ in range(3):
        origin.add_fault(WrongContentRange(shift=4096, path=NAME, only_ranged=True))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), connections=4)
    assert_success(result, out, DATA, verified=False)


@pytest.mark.parametrize("ranged", [True, False])
def test_content_length_longer_than_the_body(origin, out, ranged):
    if not ranged:
        origin.ignore_range = True  # the lie comes on a 200, where Content-Length is the size
    origin.add_fault(LongContentLength(5000, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1)
    assert_success(result, out, DATA)


def test_content_length_lie_without_a_hash_gives_the_true_file(origin, out):
    origin.ignore_range = True
    origin.add_fault(LongContentLength(5000, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), connections=1)
    assert_success(result, out, DATA, verified=False)


def test_gzip_encoding_on_a_range_answer_is_refused(origin, out):
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(Gzip(path=NAME, only_ranged=True))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1, events=events)
    assert_success(result, out, DATA)
    assert "gzip-encoded" in notes(events)
    assert all(r.headers.get("Accept-Encoding") == "identity" for r in origin.data_requests(NAME))


def test_wrong_bytes_fail_verification_and_place_nothing(origin, out):
    origin.add_fault(WrongBytes(path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1)
    assert_clean_failure(result, out, codes={ExitCode.INTEGRITY})
    assert "mismatch" in result.error and SHA in result.error
    fetch_clean(origin, out)


def test_bad_bytes_kept_from_an_interrupted_run_do_not_fail_the_next_run(origin, out):
    """Bytes a lying server sent before an interruption cannot be told from good ones until the
    hash is checked; the next run must then start over by itself, not fail (found by seed 962)."""
    origin.add_fault(WrongBytes(path=NAME))
    origin.rate = 150_000
    stop = threading.Event()

    def stop_late(event) -> None:
        if event.done and event.done > SIZE * 6 // 10:
            stop.set()

    request = GetRequest(names=[origin.url_for(NAME)], output=str(out), sha256=SHA, connections=1)
    (first,) = run_request(request, env=fault_env(), stop=stop, on_event=stop_late)
    assert assert_clean_failure(first, out, codes={ExitCode.INTERRUPTED}) > SIZE // 2
    origin.rate = None
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, events=events)
    assert_success(result, out, DATA)
    assert "downloading the whole file again" in notes(events)


# --------------------------------------------------------------------------- changes


def test_content_and_etag_change_between_requests(origin, out):
    new = random.Random(7).randbytes(SIZE)
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(ChangeContent(new, path=NAME))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1, events=events)
    # The old hash cannot match the new file: nothing is placed, nothing is stitched.
    assert_clean_failure(result, out, [DATA, new], codes={ExitCode.INTEGRITY})
    assert "changed" in notes(events)
    origin.put(NAME, DATA)
    fetch_clean(origin, out)


def test_content_change_without_a_hash_gives_the_whole_new_file(origin, out):
    new = random.Random(8).randbytes(SIZE + 1234)
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(ChangeContent(new, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), connections=1)
    assert_success(result, out, new, verified=False)
    resumed = origin.data_requests(NAME)[1]
    assert resumed.headers.get("If-Range") == hashlib.sha1(DATA).hexdigest().join('""')


def test_content_change_between_runs_is_not_stitched(origin, out):
    """A killed run's bytes must not be combined with a newer version (wget -c does)."""
    origin.add_fault(CloseAfter(100_000, path=NAME))
    for _ in range(3):
        origin.add_fault(CloseAfter(0, path=NAME))
    first = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_RETRIES=1), connections=1)
    assert assert_clean_failure(first, out, [DATA]) >= 100_000
    new = random.Random(9).randbytes(SIZE)
    origin.put(NAME, new)
    result = get_file(origin.url_for(NAME), out, env=fault_env(), connections=1)
    assert_success(result, out, new, verified=False)
    assert result.reused == 0 and result.downloaded == SIZE  # started over, and says so


def test_change_with_last_modified_only(origin, out):
    origin.send_etag = False
    new = random.Random(10).randbytes(SIZE)
    origin.add_fault(CloseAfter(100_000, path=NAME))
    origin.add_fault(ChangeContent(new, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), connections=1)
    assert_success(result, out, new, verified=False)
    assert origin.data_requests(NAME)[1].headers.get("If-Range", "").endswith("GMT")


def test_remote_that_keeps_changing_gives_exit_4(origin, out):
    rng = random.Random(11)
    origin.add_fault(CloseAfter(50_000, path=NAME))
    for _ in range(6):
        origin.add_fault(ChangeContent(rng.randbytes(SIZE), path=NAME))
        origin.add_fault(CloseAfter(50_000, path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), connections=1)
    assert_clean_failure(result, out, codes={ExitCode.INTEGRITY})
    assert "kept changing" in result.error


# --------------------------------------------------------------------------- redirects


def test_redirect_then_drop_still_resumes(origin, out):
    origin.put("real.bin", DATA)
    origin.add_fault(Redirect("/real.bin", path=NAME))
    origin.add_fault(CloseAfter(80_000, path="real.bin"))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, connections=1)
    assert_success(result, out, DATA)
    assert [r.range for r in origin.data_requests("real.bin")][1] == f"bytes=80000-{SIZE - 1}"


def test_redirect_loop_gives_exit_3(origin, out):
    result = get_file(origin.loop_url + "/" + NAME, out, env=fault_env(), sha256=SHA)
    assert_clean_failure(result, out, codes={ExitCode.NETWORK})
    assert "too many redirects" in result.error


def test_redirect_to_itself_over_and_over_gives_exit_3(origin, out):
    for _ in range(40):
        origin.add_fault(Redirect(origin.url_for(NAME), path=NAME))
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA)
    assert_clean_failure(result, out, codes={ExitCode.NETWORK})
    assert "redirect" in result.error


# --------------------------------------------------------------------------- interruption


def test_stop_mid_transfer_is_exit_7_and_resumable(origin, out):
    origin.rate = 100_000
    stop = threading.Event()
    events: list = []

    def stop_when_started(event) -> None:
        events.append(event)
        if event.done and event.done > 30_000:
            stop.set()

    request = GetRequest(names=[origin.url_for(NAME)], output=str(out), sha256=SHA)
    (result,) = run_request(request, env=fault_env(), stop=stop, on_event=stop_when_started)
    done = assert_clean_failure(result, out, [DATA], codes={ExitCode.INTERRUPTED})
    assert done > 0
    state = json.loads(Path(str(out) + ".part.json").read_text())
    assert state["size"] == SIZE
    origin.rate = None
    fetch_clean(origin, out, reused=done)
