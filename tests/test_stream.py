"""``prefetch.as_completed``: verified paths handed over as files land, against the throttled origin.

Times come from the origin's own request log (``RequestRecord.started``, same
clock as this process), never from wall-clock thresholds.
"""

from __future__ import annotations

import gc
import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

import prefetch
from prefetch.cache.layout import part_path, state_path

KiB = 1 << 10


def put_shards(origin, sizes: list[int], *, missing: tuple[int, ...] = ()) -> tuple[list[dict], list[str], dict]:
    """Shards shard-0.bin ... on the origin; the -i entries (with sha256), names, and bytes."""
    names = [f"shard-{i}.bin" for i in range(len(sizes))]
    blobs = {n: os.urandom(s) for n, s in zip(names, sizes)}
    for i, name in enumerate(names):
        if i not in missing:
            origin.put(name, blobs[name])
    entries = [{"url": origin.url_for(n), "sha256": hashlib.sha256(blobs[n]).hexdigest()} for n in names]
    return entries, names, blobs


def stream(entries, out: Path, **options):
    options.setdefault("connections", 1)
    options.setdefault("progress", False)
    return prefetch.as_completed([], urls=entries, output_dir=str(out), **options)


def first_get(origin, name: str) -> float:
    return min(r.started for r in origin.data_requests(name))


def on_disk(out: Path, names: list[str]) -> int:
    """Bytes of these files on disk: complete ones, and what each resume state records as done."""
    from prefetch.engine.resume_state import read_progress

    total = 0
    for name in names:
        final = out / name
        if final.exists():
            total += final.stat().st_size
            continue
        progress = read_progress(part_path(final), state_path(final))
        total += progress[0] if progress else 0
    return total


def no_stream_threads() -> bool:
    return not any(t.name == "prefetch-as-completed" and t.is_alive() for t in threading.enumerate())


def test_first_path_arrives_before_the_last_file_starts_and_order_given_holds(origin, home, tmp_path):
    entries, names, blobs = put_shards(origin, [256 * KiB] * 6)
    origin.total_rate = 512 * KiB
    out = tmp_path / "out"
    got, first_at = [], None
    # max_ahead=3: the scheduler would start all six at once on one host; the consumer's
    # back-pressure is what keeps shard 5 waiting here.
    for path in stream(entries, out, max_ahead=3):
        first_at = first_at or time.monotonic()
        assert path.read_bytes() == blobs[path.name]  # complete and verified when handed over
        got.append(path)
    assert got == [out / n for n in names]
    # The training loop had shard 0 before shard 5's download even began.
    assert first_at < first_get(origin, names[-1])
    assert no_stream_threads()


def test_order_given_waits_for_earlier_files_and_any_does_not(origin, home, tmp_path):
    # shard-0 is large, shard-1 small: both start together on the shared link; shard-1 lands first.
    entries, names, _ = put_shards(origin, [512 * KiB, 16 * KiB, 16 * KiB])
    origin.total_rate = 512 * KiB
    given = [p.name for p in stream(entries, tmp_path / "given")]
    assert given == names
    anyway = [p.name for p in stream(entries, tmp_path / "any", order="any")]
    assert sorted(anyway) == sorted(names) and anyway[0] != names[0]


def test_max_ahead_bounds_what_is_on_disk_ahead_of_the_consumer(origin, home, tmp_path):
    size = 128 * KiB
    entries, names, _ = put_shards(origin, [size] * 6)
    origin.total_rate = 1024 * KiB
    out = tmp_path / "out"
    paths = stream(entries, out, max_ahead=2)
    asked_at = []
    for k in range(6):
        asked_at.append(time.monotonic())
        path = next(paths)
        assert path == out / names[k]
        ahead = [n for n in names[k + 1:] if (out / n).exists() or part_path(out / n).exists()]
        on_disk = sum(((out / n).stat().st_size if (out / n).exists() else part_path(out / n).stat().st_size)
                      for n in ahead)
        assert len(ahead) <= 2 and on_disk <= 2 * size, (k, ahead)
        time.sleep(0.3)  # training on it: the downloads would run far ahead without the bound
    assert list(paths) == []
    # From the server's log: file j's first request came only after the consumer asked for file j-2.
    for j in range(2, 6):
        assert first_get(origin, names[j]) > asked_at[j - 2]


def test_a_failure_in_file_3_of_6_raises_at_the_consumer_and_stops_the_rest(origin, home, tmp_path):
    entries, names, blobs = put_shards(origin, [256 * KiB] * 6, missing=(3,))
    origin.total_rate = 512 * KiB
    out = tmp_path / "out"
    got = []
    with pytest.raises(prefetch.NetworkError, match="shard-3") as caught:  # the class ensure raises: exit 3
        for path in stream(entries, out):
            got.append(path.name)
    assert type(caught.value) is prefetch.NetworkError
    assert got == names[: len(got)] and len(got) < 3
    failed_at = first_get(origin, names[3])
    assert no_stream_threads()
    for name in names[4:]:  # never started (or stopped at once): nothing at the final name
        assert not (out / name).exists()
        assert all(r.started < failed_at + 1.0 for r in origin.data_requests(name))
    for name in names[:3]:  # each one is either complete or resumable, never half-placed
        final = out / name
        assert final.exists() or not part_path(final).exists() or state_path(final).exists()
        if final.exists():
            assert final.read_bytes() == blobs[name]
    # Once the file is there, the same call finishes the set (resuming what was on disk).
    origin.put(names[3], blobs[names[3]])
    origin.total_rate = None
    assert [p.name for p in stream(entries, out)] == names
    assert all((out / n).read_bytes() == blobs[n] for n in names)


def test_keep_going_yields_every_good_file_then_raises(origin, home, tmp_path):
    entries, names, _ = put_shards(origin, [64 * KiB] * 6, missing=(3,))
    origin.total_rate = 1024 * KiB
    got = []
    paths = stream(entries, tmp_path / "out", keep_going=True)
    with pytest.raises(prefetch.NetworkError, match="shard-3"):
        for path in paths:
            got.append(path.name)
    assert got == [n for i, n in enumerate(names) if i != 3]
    assert [r.name for r in paths.failed] == [names[3]]


def test_break_stops_the_downloads_and_leaves_them_resumable(origin, home, tmp_path):
    size = 1024 * KiB
    entries, names, blobs = put_shards(origin, [64 * KiB] + [size] * 5)
    origin.total_rate = 512 * KiB
    out = tmp_path / "out"
    for path in stream(entries, out, order="any"):
        break  # the stream is dropped here: closed, downloads stopped
    stopped = time.monotonic()
    assert no_stream_threads()  # close() waited for them
    kept = on_disk(out, names)
    time.sleep(1.5)
    assert on_disk(out, names) == kept  # nothing moves any more
    assert not [r for r in origin.requests if r.started > stopped + 1.0]
    unfinished = [n for n in names if not (out / n).exists()]
    assert unfinished
    for name in unfinished:  # in flight when stopped: a .part with its state, or nothing
        assert part_path(out / name).exists() == state_path(out / name).exists()
    origin.total_rate = None
    assert [p.name for p in stream(entries, out)] == names
    assert all((out / n).read_bytes() == blobs[n] for n in names)


def test_close_twice_with_block_repr_and_bad_arguments(origin, home, tmp_path):
    entries, names, _ = put_shards(origin, [256 * KiB] * 4)
    origin.total_rate = 256 * KiB
    with stream(entries, tmp_path / "out", max_ahead=1) as paths:
        first = next(paths)
        text = repr(paths)
        assert text.startswith("<as_completed 4 files, running: 1/4 taken") and len(text) < 120, text
    assert first.name == names[0]
    paths.close()
    paths.close()
    assert list(paths) == []
    assert "closed" in repr(paths)
    assert no_stream_threads()
    with pytest.raises(prefetch.UsageError, match="order"):
        prefetch.as_completed([], urls=entries, order="random")
    with pytest.raises(prefetch.UsageError, match="max_ahead"):
        prefetch.as_completed([], urls=entries, max_ahead=0)
    with pytest.raises(prefetch.UnknownDatasetError):
        prefetch.as_completed(["no-such-dataset"])
    gc.collect()


def test_following_a_background_job(origin, home, tmp_path):
    entries, names, blobs = put_shards(origin, [256 * KiB] * 8)  # the record is rewritten about once a second
    origin.total_rate = 512 * KiB
    out = tmp_path / "out"
    # Two files at a time (a host budget of 2), so the last starts only after the first landed.
    job = prefetch.ensure([], background=True, urls=entries, output_dir=str(out), connections=1, host_connections=2)
    with pytest.raises(prefetch.UsageError, match="max_ahead"):
        prefetch.as_completed(job=job.id, max_ahead=2)
    got, first_at = [], None
    for path in prefetch.as_completed(job=job.id, interval=0.1):
        first_at = first_at or time.monotonic()
        assert path.read_bytes() == blobs[path.name]
        got.append(path.name)
    assert got == names
    assert first_at < first_get(origin, names[-1])
    assert prefetch.status(job.id).state == "done"
    with pytest.raises(prefetch.JobNotFoundError):
        prefetch.as_completed(job="j0000-nope")


def test_fetch_files_hooks_contract(origin, home, tmp_path):
    """before_start in index order, False = not started (interrupted); on_file_done once per file."""
    from prefetch.api import make_request
    from prefetch.flow.planning import run_request

    entries, names, _ = put_shards(origin, [32 * KiB] * 5, missing=(1,))
    request = make_request([], urls=entries, output_dir=str(tmp_path / "out"), connections=1)
    asked, done = [], []
    lock = threading.Lock()

    def before_start(index: int) -> bool:
        with lock:
            asked.append(index)
        return index != 3

    def on_file_done(index: int, result) -> None:
        with lock:
            done.append((index, result.status, result.exit_code))

    results = run_request(request, before_start=before_start, on_file_done=on_file_done)
    assert sorted(asked) == [0, 1, 2, 3, 4] and asked[:2] == [0, 1]  # started in index order (2 at a time)
    assert sorted(done) == [(0, "downloaded", 0), (1, "failed", 3), (2, "downloaded", 0), (3, "interrupted", 7),
                            (4, "downloaded", 0)]
    assert not origin.data_requests(names[3])  # refused: never started
    assert [r.status for r in results] == ["downloaded", "failed", "downloaded", "interrupted", "downloaded"]
