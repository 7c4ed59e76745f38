"""``prefetch.as_completed`` used as a hostile (or just unusual) caller would, against the real origin."""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest

import prefetch
from tests.test_jobs import poll
from tests.test_stream import no_stream_threads, put_shards, stream

KiB = 1 << 10


def test_streams_closed_out_of_order_put_the_interrupt_handler_back(origin, home, tmp_path):
    """Two streams open at once (train and validation zipped) and closed in the order they
    were opened: the SIGINT handler ends as it was. Before,
    the second close put the first stream's handler back for good (each such pair chained
    one more, each keeping its feed and results alive)."""
    entries, names, _ = put_shards(origin, [64 * KiB] * 3)
    origin.total_rate = 256 * KiB
    before = signal.getsignal(signal.SIGINT)
    train = stream(entries, tmp_path / "train")
    val = stream(entries, tmp_path / "val")
    assert next(train).name == names[0] and next(val).name == names[0]
    train.close()
    val.close()
    assert signal.getsignal(signal.SIGINT) is before
    assert no_stream_threads()
    # and again, closed the other way round
    train, val = stream(entries, tmp_path / "train2"), stream(entries, tmp_path / "val2")
    val.close()
    train.close()
    assert signal.getsignal(signal.SIGINT) is before


def test_an_interrupt_stops_every_open_stream_and_still_reaches_the_caller(origin, home, tmp_path):
    entries, names, _ = put_shards(origin, [512 * KiB] * 3)
    origin.total_rate = 128 * KiB
    a = stream(entries, tmp_path / "a")
    b = stream(entries, tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises here
    # both stop: each ends with the resumable-stop error at its next step, not a path
    for paths in (a, b):
        with pytest.raises(prefetch.InterruptedTransferError):
            list(paths)
    assert no_stream_threads()
    a.close()
    b.close()


def test_following_a_job_whose_record_turns_corrupt_raises_instead_of_ending_short(origin, home, tmp_path):
    """The record of a followed job becomes unreadable (its worker died mid-write, a disk
    filled): the files the follower had not handed over yet raise at the loop. Before, the
    corrupt record listed no files, so the loop simply ended after the first file, as if the
    set were complete."""
    from prefetch.jobs.records import record_path
    from tests.test_jobs import stop_leftover_workers  # noqa: F401 - the workers are killed after

    entries, names, blobs = put_shards(origin, [16 * KiB] + [2048 * KiB] * 3)
    origin.total_rate = 256 * KiB
    job = prefetch.ensure([], background=True, urls=entries, output_dir=str(tmp_path / "out"), connections=1,
                          host_connections=1)
    paths = prefetch.as_completed(job=job.id, interval=0.1)
    first = next(paths)
    assert first.name == names[0] and first.read_bytes() == blobs[names[0]]
    pid = poll(lambda: prefetch.status(job.id).pid, what="the worker's pid")
    # Stopped first, so it cannot write its record again; cut short while it still looks
    # alive, then killed: a follower that looked between a kill and the cut saw the worker
    # gone first and said so ("stopped without finishing"), a failed run at load 11.
    os.kill(pid, signal.SIGSTOP)
    record_path(job.id).write_text('{"id": "' + job.id + '", "fil')  # cut short
    os.kill(pid, signal.SIGKILL)
    poll(lambda: not _alive(pid), what="the worker to die")
    with pytest.raises(prefetch.PrefetchError, match="corrupt"):
        rest = list(paths)
        pytest.fail(f"the loop ended with {rest} instead of raising")
    assert no_stream_threads()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (our own child, not reaped yet) is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataset_of_urls_entries_yields_them(origin, home, tmp_path, workers):
    """torch_dataset([], urls=[{"url", "sha256"}]) (the -i entries, as as_completed takes them)
    yielded nothing at all, silently: the dataset dealt out only ``names``, and a worker (or the
    main process) with no names returned at once. Each entry is now dealt like a name."""
    from pytest_socket import socket_allow_hosts
    from torch.utils.data import DataLoader

    socket_allow_hosts(["127.0.0.1", "::1", "localhost"], allow_unix_socket=True)  # DataLoader workers
    entries, names, blobs = put_shards(origin, [32 * KiB] * 3)
    out = tmp_path / "out"
    dataset = prefetch.torch_dataset([], urls=entries, output_dir=str(out), connections=1, progress=False)
    got = list(DataLoader(dataset, batch_size=None, num_workers=workers))
    assert sorted(got) == [str(out / n) for n in names]
    assert all(len(origin.data_requests(n)) == 1 for n in names)  # each fetched once, by one worker
    # a name and entries together: every one of them, once
    origin.put("extra.bin", b"e" * 1000)
    mixed = prefetch.torch_dataset(origin.url_for("extra.bin"), urls=entries[:1], output_dir=str(out),
                                   connections=1, progress=False)
    assert sorted(DataLoader(mixed, batch_size=None, num_workers=workers)) == [str(out / "extra.bin"),
                                                                                str(out / names[0])]


def test_a_stream_collected_on_a_download_thread_does_not_stall_it(origin, home, tmp_path):
    """A stream kept in a reference cycle (an object holding it and itself) is freed by the
    cyclic GC on whichever thread allocates at that moment, often a download thread (here:
    gc.collect() in on_event, called on one). Its finaliser closed the stream by joining the
    run, which waits for that very thread: 30 s stalled (the join's timeout) with whatever
    the thread held. Now a finaliser off the consumer's thread only stops the downloads."""
    import threading

    entries, names, _ = put_shards(origin, [64 * KiB, 2048 * KiB, 2048 * KiB])  # 1 and 2: seconds more of events
    origin.total_rate = 512 * KiB
    armed, collected_on = [False], []

    def on_event(event) -> None:
        if armed[0]:
            armed[0] = False
            collected_on.append(threading.current_thread().name)
            gc.collect()

    class Trainer:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the cyclic GC frees it
            self.paths = stream(entries, tmp_path / "out", on_event=on_event)

    gc.disable()
    try:
        trainer = Trainer()
        assert next(trainer.paths).name == names[0]
        del trainer
        armed[0] = True
        poll(lambda: collected_on, what="a collection on a download thread", timeout=30)
        # about a second to stop, as for a break (it took the 30 s join timeout)
        poll(no_stream_threads, what="the stream's thread to end", timeout=10)
    finally:
        gc.enable()
    assert collected_on[0].startswith("prefetch-file")
    assert [p.name for p in stream(entries, tmp_path / "out")] == names  # resumes cleanly


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the sink's, as raised
@pytest.mark.parametrize("pooled", [False, True], ids=["pulled", "pooled"])
def test_a_sink_that_raises_never_makes_a_file_vanish_from_the_run(origin, home, tmp_path, pooled):
    """fetch_files' rule: one result per file, whatever its event sink does. A sink that raised
    on a file's FAILED event (as a renderer writing to a closed stream would) left that file
    without a result: run_request returned fewer results than files (and as_completed ended
    without it). Checked at run_request, below the API's guard of callers' callbacks."""
    from prefetch.api import make_request
    from prefetch.flow.planning import run_request

    entries, names, _ = put_shards(origin, [16 * KiB] * 4, missing=(1, 2))

    def sink(event) -> None:
        if event.kind.name == "FAILED":
            raise BrokenPipeError("the renderer's stream is gone")

    request = make_request([], urls=entries, output_dir=str(tmp_path / "out"), connections=1)
    hooks = {"before_start": lambda index: True} if pooled else {}  # (before_start: run_in_order's pool)
    results = run_request(request, on_event=sink, **hooks)
    assert sorted(r.name for r in results) == sorted(names)
    failed = sorted((r for r in results if r.status == "failed"), key=lambda r: r.name)
    assert [r.name for r in failed] == [names[1], names[2]]
    assert all("404" in r.error and "internal error" not in r.error for r in failed)  # their own errors


def test_following_a_finished_job_does_not_hand_over_a_file_removed_since(origin, home, tmp_path):
    """as_completed(job=) of a job that finished earlier handed over the paths its record
    lists, even one removed since: the training loop got a path that does not exist. It
    raises at that file instead, never handing it over. (Whether shard 0 comes first depends
    on whether the loop asked before the follower read the failure: a failure raises at the
    loop's next step.)"""
    entries, names, blobs = put_shards(origin, [8 * KiB] * 3)
    out = tmp_path / "out"
    job = prefetch.ensure([], background=True, urls=entries, output_dir=str(out))
    prefetch.wait(job.id, timeout=60, progress=False)
    (out / names[1]).unlink()
    got = []
    with pytest.raises(prefetch.PrefetchError, match=f"{names[1]}.*no longer there"):
        for path in prefetch.as_completed(job=job.id):
            got.append(path.name)
    assert got in ([], names[:1])


@pytest.mark.parametrize("call", ["ensure", "as_completed"])
def test_nothing_keeps_the_callers_callback_once_the_run_ended(origin, home, tmp_path, call):
    """A notebook's on_event is often a bound method of something big (a trainer, its model).
    flow/files.py's one-entry cache of the run's transfer options kept the last run's hosts,
    hence its event sinks (the callback, the stream's feed, the progress bar) alive until the
    next download, however long that was."""
    import weakref

    entries, names, _ = put_shards(origin, [8 * KiB] * 2)

    class Trainer:
        def on_event(self, event) -> None:
            pass

    trainer = Trainer()
    gone = weakref.ref(trainer)
    options = dict(urls=entries, output_dir=str(tmp_path / call), on_event=trainer.on_event, progress=False)
    if call == "ensure":
        assert len(prefetch.ensure([], **options)) == 2
    else:
        assert len(list(prefetch.as_completed([], **options))) == 2
    del trainer, options
    gc.collect()
    assert gone() is None
