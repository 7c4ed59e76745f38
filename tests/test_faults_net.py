"""Hostile networks (issue 11 classes 2, 3, 8, 10; issue 13 failover): the promise holds.

Captive portals and block pages never become data files and never cost a partial;
dead sources are given up on in bounded time (and dropped at once while another
delivers); tampered state files and over-long ``.part`` files never reach a final
path; an out-of-sync pool without validators never yields a stitched file; a 206
that starts elsewhere is used, not retried to death; with several sources the
file finishes from the good one. Every server is on 127.0.0.1; bytes per source
come from the servers' own logs.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import threading
import time
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from prefetch.model.events import EventKind
from prefetch.flow.request import GetRequest
from prefetch.flow.planning import plan_request, run_request
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from prefetch.engine.resume_state import load_state
from tests.faults_net_helpers import SlowHeadServer, closed_port
from tests.helpers import write_registry
from tests.origin import PORTAL_PAGE, CloseAfter, OriginServer, SilentServer, WebPage, WrongContentRange
from tests.test_faults import assert_success, fault_env, get_file

NAME = "data.bin"
SIZE = 256 << 10
DATA = random.Random(11).randbytes(SIZE)
SHA = hashlib.sha256(DATA).hexdigest()


def notes(events) -> str:
    return "\n".join(e.message for e in events if e.kind is EventKind.NOTE)


@pytest.fixture
def out(tmp_path) -> Path:
    path = tmp_path / "out" / NAME
    path.parent.mkdir()
    return path


def part_of(out: Path) -> Path:
    return Path(str(out) + ".part")


def state_of(out: Path) -> Path:
    return Path(str(out) + ".part.json")


# --------------------------------------------------------------------------- class 2: captive portals


@pytest.mark.parametrize("sha256", [None, SHA], ids=["no-hash", "sha256"])
def test_a_captive_portal_page_is_never_placed(home, origin, out, sha256):
    origin.put(NAME, DATA)
    origin.portal = PORTAL_PAGE
    result = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=sha256)
    assert result.exit_code == ExitCode.NETWORK, result.error
    assert "web page instead of the file" in result.error and "captive portal" in result.error
    assert "\n" not in result.error
    assert not out.exists()
    assert not part_of(out).exists()  # nothing was downloaded: nothing to resume either


def test_a_web_page_without_content_type_is_known_by_its_first_bytes(home, origin, tmp_path):
    name = "archive.tar.gz"
    data = __import__("gzip").compress(DATA)
    origin.put(name, data)
    for _ in range(30):
        origin.add_fault(WebPage(content_type="application/octet-stream", path=name))
    out = tmp_path / "out" / name
    out.parent.mkdir()
    result = get_file(origin.url_for(name), out, env=fault_env())
    assert result.exit_code == ExitCode.NETWORK
    assert "web page" in result.error
    assert not out.exists()
    origin.clear_faults()
    assert_success(get_file(origin.url_for(name), out, env=fault_env()), out, data, verified=False)


def test_a_body_of_the_wrong_type_for_its_name_is_refused(home, origin, tmp_path):
    name = "weights.npz"
    origin.put(name, b"PK\x03\x04" + DATA)
    for _ in range(30):
        origin.add_fault(WebPage(body=b"ERROR 451: blocked by policy\n" * 40, content_type="application/zip",
                                 path=name))
    out = tmp_path / "out" / name
    out.parent.mkdir()
    result = get_file(origin.url_for(name), out, env=fault_env())
    assert result.exit_code == ExitCode.NETWORK
    assert "not a zip file" in result.error
    assert not out.exists()


def test_fashion_mnist_through_a_portal_places_no_page(home, origin, cli):
    origin.portal = PORTAL_PAGE
    proc = cli("get", "fashion_mnist", "--mirror", origin.url, env=dict(fault_env(), PREFETCH_RETRIES="2"))
    assert proc.returncode == ExitCode.NETWORK, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
    assert errors and all("web page instead of the file" in line for line in errors)
    assert "Traceback" not in proc.stderr
    datasets = home / ".keras" / "datasets"
    placed = [p for p in datasets.rglob("*") if p.is_file()] if datasets.exists() else []
    assert placed == []


@pytest.mark.parametrize("content_type", ["text/html", None], ids=["text-html", "sniffed"])
def test_a_portal_mid_resume_keeps_the_partial(home, origin, out, content_type):
    origin.put(NAME, DATA)
    origin.add_fault(CloseAfter(100_000, path=NAME))
    first = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_RETRIES="0"), sha256=SHA, connections=1)
    assert first.exit_code == ExitCode.NETWORK
    kept = load_state(state_of(out))
    assert kept is not None and sum(b - a for a, b in kept.done) >= 100_000

    if content_type == "text/html":
        origin.portal = PORTAL_PAGE
    else:
        for _ in range(30):
            origin.add_fault(WebPage(content_type=None, path=NAME))
    events: list = []
    second = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA, events=events)
    assert second.exit_code == ExitCode.NETWORK
    assert "web page" in second.error
    assert "changed" not in notes(events)  # a page is not "the remote changed"
    after = load_state(state_of(out))
    assert after is not None and after.done == kept.done and after.validators == kept.validators
    on_disk = part_of(out).read_bytes()
    assert all(on_disk[a:b] == DATA[a:b] for a, b in after.done)

    origin.portal = None
    origin.clear_faults()
    third = get_file(origin.url_for(NAME), out, env=fault_env(), sha256=SHA)
    assert_success(third, out, DATA)
    assert third.reused >= 100_000


# --------------------------------------------------------------------------- class 3: time bounds


def quick_env(**extra) -> dict[str, str]:
    """Per-attempt timeouts derived from PREFETCH_TIMEOUT (the conftest's fixed ones removed)."""
    env = fault_env(**extra)
    env.pop("PREFETCH_READ_TIMEOUT", None)
    env.pop("PREFETCH_CONNECT_TIMEOUT", None)
    return env


def test_a_head_sent_a_byte_at_a_time_hits_the_head_deadline(home, out):
    with SlowHeadServer(interval=0.1) as server:
        events: list = []
        result = get_file(server.url + NAME, out, env=quick_env(PREFETCH_TIMEOUT="1.2"), events=events, deadline=40)
    assert result.exit_code == ExitCode.NETWORK
    assert "no complete response head within" in result.error
    assert "retry 1/" in notes(events) and "response head" in notes(events)  # each retry says why
    assert server.bytes_sent > 5  # bytes kept coming (every 0.1s, within the 0.6s per-read timeout)


def test_a_server_that_accepts_and_never_answers_is_given_up_by_time_not_count(home, silent_origin, out):
    result = get_file(silent_origin.url_for(NAME), out, env=quick_env(PREFETCH_TIMEOUT="1.5", PREFETCH_RETRIES="1000"),
                      deadline=40)
    assert result.exit_code == ExitCode.NETWORK
    assert "without a byte" in result.error and "--timeout 1.5" in result.error
    assert "timed out" in result.error


def test_an_unresolvable_host_is_given_up_quickly(home, out):
    """(After a connection worked: before any, a name that does not resolve is said at once,
    tests/test_hosted15_internet_off.py.)"""
    env = quick_env(PREFETCH_TIMEOUT="3", PREFETCH_RETRIES="1000", PREFETCH_RESOLVE="origin.invalid=fail")
    with OriginServer() as server:
        server.put("warm.bin", b"w")
        assert get_file(server.url + "warm.bin", out.with_name("warm.bin"), env=env).exit_code == 0
    events: list = []
    result = get_file("http://origin.invalid:8/" + NAME, out, env=env, events=events, deadline=40)
    assert result.exit_code == ExitCode.NETWORK
    assert "name lookup failed" in result.error and "without a byte" in result.error
    assert "name lookup failed" in notes(events) and "retry 1/1000" in notes(events)


def test_a_refused_connection_is_given_up_quickly(home, out):
    env = quick_env(PREFETCH_TIMEOUT="3", PREFETCH_RETRIES="1000")
    result = get_file(f"http://127.0.0.1:{closed_port()}/{NAME}", out, env=env, deadline=40)
    assert result.exit_code == ExitCode.NETWORK
    # (a host never reached: four refused tries, not the budget of a third of --timeout: net/unreachable.py)
    assert "Connection refused; 4 tries, and it was never reached" in result.error, result.error


def test_prefetch_resolve_is_consulted_where_connections_are_made(home, origin, out):
    origin.put(NAME, DATA)
    env = fault_env(PREFETCH_RESOLVE=f"files.example=127.0.0.1, other.example=")
    result = get_file(f"http://files.example:{origin.port}/{NAME}", out, env=env, sha256=SHA)
    assert_success(result, out, DATA)
    assert origin.data_requests(NAME)[0].headers["Host"].startswith("files.example")


def test_retries_and_timeout_flags_reach_the_transfer_and_the_job_record(home, cli, tmp_path):
    request = GetRequest(names=["http://127.0.0.1:9/x.bin"], retries=3, timeout=12.0)
    again = GetRequest.from_dict(json.loads(json.dumps(request.to_dict())))  # as a job record stores it
    _, options = plan_request(again, env={})
    assert options.transfer.max_attempts == 3 and options.transfer.timeout == 12.0
    assert options.transfer.timeouts.connect == 4.0 and options.transfer.timeouts.read == 6.0
    env = dict(os.environ)
    env.pop("PREFETCH_READ_TIMEOUT"), env.pop("PREFETCH_CONNECT_TIMEOUT")
    proc = cli("get", f"http://127.0.0.1:{closed_port()}/x.bin", "-o", str(tmp_path / "x.bin"),
               "--retries", "0", "--timeout", "2", env=env)
    assert proc.returncode == ExitCode.NETWORK
    assert proc.stderr.count("prefetch: error:") == 1 and "refused" in proc.stderr.lower()
    bad = cli("get", "http://127.0.0.1:9/x.bin", "--timeout", "0")
    assert bad.returncode == ExitCode.USAGE


# --------------------------------------------------------------------------- class 8: state files


def write_state(out: Path, *, part: bytes, state: dict) -> None:
    part_of(out).write_bytes(part)
    state_of(out).write_text(json.dumps(state))


def base_state(origin: OriginServer, url: str, **fields) -> dict:
    state = {"version": 1, "urls": [url], "size": SIZE, "ranges": True,
             "validators": {url: {"etag": origin.etag(NAME)}}, "done": [[0, SIZE // 2]], "algorithm": None}
    state.update(fields)
    return state


@pytest.mark.parametrize("fields", [
    {"size": True, "done": [[0, 1]]},
    {"size": str(SIZE)},
    {"done": [[0, True]]},
    {"done": [[0.5, 100]]},
    {"ranges": "yes"},
    {"validators": {"x": {"etag": 5}}},
    {"urls": "http://x/"},
], ids=["size-true", "size-string", "done-bool", "done-float", "ranges-string", "etag-int", "urls-string"])
def test_a_state_with_wrong_types_starts_over_and_says_so(home, origin, out, fields):
    origin.put(NAME, DATA)
    url = origin.url_for(NAME)
    write_state(out, part=DATA[: SIZE // 2], state=base_state(origin, url, **fields))
    events: list = []
    result = get_file(url, out, env=fault_env(), events=events)
    assert_success(result, out, DATA, verified=False)
    assert result.reused == 0
    assert "unusable" in notes(events)


def test_a_part_longer_than_the_file_is_cut_not_placed_with_junk(home, origin, out):
    origin.put(NAME, DATA)
    url = origin.url_for(NAME)
    write_state(out, part=DATA + b"JUNK" * 1000, state=base_state(origin, url, done=[[0, SIZE]]))
    events: list = []
    result = get_file(url, out, env=fault_env(), events=events)
    assert_success(result, out, DATA, verified=False)
    assert "past the file" in notes(events)


def test_a_resumed_file_whose_hash_fails_is_downloaded_again_once(home, origin, out):
    origin.put(NAME, DATA)
    url = origin.url_for(NAME)
    lost = bytearray(DATA[: SIZE // 2])
    lost[1000:9000] = bytes(8000)  # recorded as done, lost in a machine reset
    state = base_state(origin, url, algorithm="sha256")
    write_state(out, part=bytes(lost), state=state)
    events: list = []
    result = get_file(url, out, env=fault_env(), sha256=SHA, events=events)
    assert_success(result, out, DATA)
    assert "downloading the whole file again" in notes(events)


def test_the_part_is_synced_before_a_state_save_that_adds_ranges(origin, tmp_path, monkeypatch):
    import prefetch.engine.resume_state as state_module

    data = random.Random(3).randbytes(4 << 20)
    origin.put(NAME, data)
    origin.rate = 4 << 20
    log: list[tuple[str, int]] = []
    real_sync, real_save = os.fdatasync, state_module.save_state

    def fdatasync(fd):
        log.append(("sync", 0))
        return real_sync(fd)

    def save_state(path, state):
        log.append(("save", sum(b - a for a, b in state.done)))
        return real_save(path, state)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(state_module, "save_state", save_state)
    part = tmp_path / "f.part"
    download_to_part(urls=[origin.url_for(NAME)], part=part, state_file=tmp_path / "f.part.json",
                     options=TransferOptions(connections=2, state_interval=0.1))
    assert part.read_bytes() == data
    saves = [(i, done) for i, (kind, done) in enumerate(log) if kind == "save"]
    assert len(saves) >= 3
    recorded = 0
    for i, done in saves:
        if done > recorded:  # this save records new ranges: a sync came after the last save
            previous = max([j for j, _ in saves if j < i], default=-1)
            assert any(kind == "sync" for kind, _ in log[previous + 1:i]), log
            recorded = done


# --------------------------------------------------------------------------- class 10: odd servers


def test_a_pool_of_versions_without_validators_gives_one_version_not_a_stitch(home, origin, out):
    size = 1 << 20
    versions = [random.Random(seed).randbytes(size) for seed in (1, 2)]
    origin.send_etag = origin.send_last_modified = False
    origin.set_pool(NAME, versions)
    origin.rate = 1 << 20
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), events=events)
    assert result.exit_code == 0, result.error
    assert out.read_bytes() in versions
    assert "one stream" in notes(events)
    assert len(origin.data_requests(NAME)) == 1


def test_a_broken_stream_without_validators_resumes_only_onto_the_same_version(home, origin, out):
    size = 1 << 20
    versions = [random.Random(seed).randbytes(size) for seed in (3, 4)]
    origin.send_etag = origin.send_last_modified = False
    origin.set_pool(NAME, versions)
    origin.add_fault(CloseAfter(300_000, path=NAME))  # the first stream breaks; the next backend differs
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(), events=events)
    assert result.exit_code == 0, result.error
    assert out.read_bytes() in versions
    assert "sent other bytes than before" in notes(events)


@pytest.mark.parametrize("shift", [-5000, 7000], ids=["starts-before", "starts-after"])
def test_a_206_starting_elsewhere_is_used_where_it_belongs(home, origin, out, shift):
    origin.put(NAME, DATA)
    for _ in range(40):
        origin.add_fault(WrongContentRange(shift=shift, path=NAME, only_ranged=True))
    events: list = []
    result = get_file(origin.url_for(NAME), out, env=fault_env(PREFETCH_RETRIES="2"), sha256=SHA, events=events)
    assert_success(result, out, DATA)
    assert "using the bytes where they belong" in notes(events)


# --------------------------------------------------------------------------- issue 13: failover


def get_dataset(registry: Path, *, mirrors: list[str], also_origin: bool, env: dict, deadline: float = 90):
    request = GetRequest(names=["blob"], registries=[str(registry)], mirrors=mirrors, also_origin=also_origin)
    events: list = []
    box: dict = {}

    def target() -> None:
        try:
            box["results"] = run_request(request, env=env, on_event=events.append)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(deadline)
    assert not thread.is_alive(), "prefetch get hung"
    if "error" in box:
        raise box["error"]
    (result,) = box["results"]
    return result, events


BAD_KINDS = ["refused", "dns", "web-page", "trickle"]


@pytest.mark.parametrize("bad_first", [False, True], ids=["origin-bad", "first-mirror-bad"])
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_failover_finishes_from_the_good_source(home, tmp_path, kind, bad_first):
    size = 6 << 20
    data = random.Random(5).randbytes(size)
    sha = hashlib.sha256(data).hexdigest()
    env = fault_env(PREFETCH_DEMOTE_WINDOW="0.5")
    env.pop("PREFETCH_MIN_SPLIT")  # real piece sizes: a slow source would hold half-MiB pieces
    with OriginServer() as good, OriginServer() as bad:
        good.put("blob.bin", data)
        good.rate = 3 << 20
        bad.put("blob.bin", data)
        bad_url = bad.url
        if kind == "refused":
            bad_url = f"http://127.0.0.1:{closed_port()}/"
        elif kind == "dns":
            bad_url = f"http://bad-origin.invalid:{bad.port}/"
            env["PREFETCH_RESOLVE"] = "*=fail"
        elif kind == "web-page":
            bad.portal = PORTAL_PAGE
        else:
            bad.rate = 20_000
        registry = write_registry(tmp_path / "reg.toml", "blob", (good.url if bad_first else bad_url) + "blob.bin",
                                  sha256=sha, target="blob.bin")
        mirrors = [bad_url, good.url] if bad_first else [good.url]
        result, events = get_dataset(registry, mirrors=mirrors, also_origin=not bad_first, env=env)
        assert result.exit_code == 0, result.error
        assert Path(result.path).read_bytes() == data
        served_good = good.bytes_sent
        served_bad = sum(r.body_bytes_sent for r in bad.data_requests("blob.bin")) if kind == "trickle" else 0
    assert served_good >= size * 0.95  # the good source served nearly all the bytes ...
    assert served_good <= size * 1.3  # ... once (plus what was in flight when pieces moved)
    assert served_bad <= size * 0.05
    text = notes(events)
    if kind == "trickle":
        assert "demoted source" in text
    else:
        assert "dropped source" in text
        assert "failures in a row" not in text  # dropped at its first failure, not after several
