"""prefetch in a real Jupyter kernel: cells typed as a user types them, asserted on what Jupyter shows.

A ``!`` cell runs its command under ipykernel's pseudo-terminal (80x24) with
FORCE_COLOR/CLICOLOR set; the kernel's interrupt is SIGINT. Every test drives a real
ipykernel through jupyter_client (the ``kernel`` fixture) against the local origin.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from prefetch.cache.layout import part_path, state_path
from prefetch.engine.resume_state import read_progress
from tests.kernel import Kernel
from tests.test_jobs import poll as _poll

MiB = 1 << 20


def poll(check, *, what: str, timeout: float = 60.0):
    return _poll(check, what=what, timeout=timeout)


def on_disk(final: Path) -> int:
    """Bytes of ``final`` recorded done in its resume state (0 if none yet)."""
    progress = read_progress(part_path(final), state_path(final))
    return progress[0] if progress else 0


def done_ranges(final: Path) -> list[tuple[int, int]]:
    """The byte ranges of ``final`` its resume state records as on disk."""
    from prefetch.engine.resume_state import load_state

    state = load_state(state_path(final))
    return [(lo, hi) for lo, hi in state.done] if state else []


def resent(origin, name: str, moment: float, kept: list[tuple[int, int]]) -> int:
    """Bytes of ``kept`` that the origin sent again for ``name`` on requests made after ``moment``.

    (What a resume costs twice: bytes already on disk downloaded again.)
    """
    total = 0
    for r in list(origin.requests):
        if r.started < moment or r.name != name or not r.body_bytes_sent:
            continue
        spec = r.headers.get("Range") or "bytes=0-"
        start = int(spec.split("=")[1].split("-")[0]) if r.status == 206 else 0
        end = start + r.body_bytes_sent
        total += sum(max(0, min(end, hi) - max(start, lo)) for lo, hi in kept)
    return total


def part_files(final: Path) -> list[Path]:
    return sorted(final.parent.glob(final.name + ".part*"))


def interrupt_when_bytes(kernel: Kernel, cell, finals: list[Path], *, at_least: int = 256 << 10):
    """Interrupt the kernel once every file has bytes recorded on disk; the cell, once it ended.

    The cell must end soon after the interrupt (the behaviour is: within about a second;
    the deadline here is generous so a loaded machine does not fail the test).
    """
    poll(lambda: kernel.poll(cell) or all(on_disk(f) >= at_least for f in finals), what="bytes on disk")
    assert cell.ended is None, f"the cell ended before the interrupt:\n{cell.rendered}"
    kernel.interrupt()
    interrupted = time.monotonic()
    poll(lambda: kernel.poll(cell), what="the cell to end after the interrupt", timeout=20)
    return cell.ended - interrupted


def test_kernel_interrupt_stops_ensure_of_one_file_and_the_next_ensure_resumes(kernel, origin, tmp_path):
    size = 24 * MiB
    data = os.urandom(size)
    origin.put("big.bin", data)
    origin.total_rate = 512 << 10  # 48 s for the whole file: an interrupt must not wait for it
    final = tmp_path / "big.bin"
    code = (f"import prefetch\nprefetch.ensure({origin.url_for('big.bin')!r}, output={str(final)!r}, "
            f"progress=False)")

    cell = kernel.start(code)
    interrupt_when_bytes(kernel, cell, [final])
    assert cell.error is not None and cell.error["ename"] == "InterruptedTransferError", cell.error
    assert not final.exists() and part_files(final)  # nothing unverified at the final name; resumable
    kept = on_disk(final)
    assert 0 < kept < size
    ranges = done_ranges(final)

    origin.total_rate = None
    before = time.monotonic()
    again = kernel.run(code + "\nprint('resumed ok')")
    assert again.error is None, again.error
    assert "resumed ok" in again.rendered
    assert final.read_bytes() == data
    assert resent(origin, "big.bin", before, ranges) <= 256 << 10  # what was on disk is not fetched again


def test_kernel_interrupt_stops_ensure_of_two_files(kernel, origin, tmp_path):
    size = 16 * MiB
    blobs = {name: os.urandom(size) for name in ("one.bin", "two.bin")}
    for name, data in blobs.items():
        origin.put(name, data)
    origin.total_rate = 512 << 10
    urls = [origin.url_for(name) for name in blobs]
    finals = [kernel_cwd(tmp_path) / name for name in blobs]
    code = f"import prefetch\nprefetch.ensure({urls!r}, progress=False)"

    cell = kernel.start(code)
    interrupt_when_bytes(kernel, cell, finals, at_least=64 << 10)
    assert cell.error is not None and cell.error["ename"] == "InterruptedTransferError", cell.error
    kept = sum(on_disk(f) for f in finals)
    assert all(not f.exists() for f in finals) and kept > 0
    ranges = {f.name: done_ranges(f) for f in finals}

    origin.total_rate = None
    before = time.monotonic()
    again = kernel.run(code)
    assert again.error is None, again.error
    for final in finals:
        assert final.read_bytes() == blobs[final.name]
        assert resent(origin, final.name, before, ranges[final.name]) <= 256 << 10


def kernel_cwd(tmp_path: Path) -> Path:
    return tmp_path / "notebook"  # the kernel fixture's working directory


def test_interrupting_a_get_cell_keeps_the_download_resumable(kernel, origin, tmp_path):
    size = 24 * MiB
    data = os.urandom(size)
    origin.put("cell.bin", data)
    origin.total_rate = 512 << 10
    final = tmp_path / "cell.bin"
    line = f"!prefetch get {origin.url_for('cell.bin')} -o {final}"

    cell = kernel.start(line)
    interrupt_when_bytes(kernel, cell, [final])
    assert not final.exists() and part_files(final)
    assert on_disk(final) > 0
    ranges = done_ranges(final)

    origin.total_rate = None
    before = time.monotonic()
    again = kernel.run(line)
    assert "resuming: " in again.rendered and f"downloaded {final}" in again.rendered, again.rendered
    assert final.read_bytes() == data
    assert resent(origin, "cell.bin", before, ranges) <= 256 << 10


def test_background_get_returns_at_once_and_the_job_finishes_after_the_cell(kernel, origin, tmp_path):
    data = os.urandom(4 * MiB)
    origin.put("later.bin", data)
    origin.total_rate = 1 * MiB  # about 4 s: longer than the cell
    final = tmp_path / "later.bin"

    cell = kernel.run(f"!prefetch get {origin.url_for('later.bin')} -o {final} -b", timeout=30)
    assert "started job j" in cell.rendered, cell.rendered
    assert not final.exists()  # the cell ended before the download did
    poll(final.exists, what="the job to finish after the cell", timeout=120)
    assert final.read_bytes() == data
    kernel.run("!prefetch wait")  # (the file is renamed into place a moment before its record says done)
    done = kernel.run("!prefetch status")
    assert " done " in done.rendered and "later.bin" in done.rendered


def test_status_and_mirror_list_are_whole_in_a_cell_and_no_color_means_no_escape(kernel, origin, tmp_path):
    name = "a-rather-long-dataset-file-name-for-the-table-v2.bin"  # random bytes: not .npz (a zip is checked)
    origin.put(name, os.urandom(8 * MiB))
    origin.total_rate = 1 * MiB
    kernel.run(f"!prefetch get {origin.url_for(name)} -o {tmp_path}/out/ -b")
    from prefetch.jobs import list_jobs

    poll(lambda: list_jobs()[0].files[0].bytes > 0, what="the job's record to show bytes")

    status = kernel.run("!prefetch status")
    rows = [line for line in status.lines if name in line]
    assert len(rows) == 1, status.rendered  # one line per file: nothing wrapped
    assert "…" not in status.rendered and "downloading" in rows[0]
    assert "/8.0MiB" in rows[0] and "%" in rows[0] and "/s" in rows[0]
    assert "\x1b[" in status.raw  # the kernel sets FORCE_COLOR: colour is on ...
    plain = kernel.run("!NO_COLOR=1 prefetch status")
    assert "\x1b" not in plain.raw and name in plain.rendered  # ... and NO_COLOR means no escape byte at all

    mirrors = kernel.run("!prefetch mirror list")
    for url in ("https://pypi.tuna.tsinghua.edu.cn/simple", "https://mirrors.huaweicloud.com/repository/pypi/simple",
                "http://mirrors.cloud.aliyuncs.com/pypi/simple/", "https://mirrors.tuna.tsinghua.edu.cn/anaconda"):
        assert any(url in line for line in mirrors.lines), (url, mirrors.rendered)
    assert "…" not in mirrors.rendered and "│" not in mirrors.rendered


def test_foreground_get_in_a_cell_is_short_and_sends_few_messages(kernel, origin, tmp_path):
    origin.put("fg.bin", os.urandom(6 * MiB))
    origin.total_rate = 1 * MiB  # about 6 s of progress
    final = tmp_path / "fg.bin"

    cell = kernel.run(f"!prefetch get {origin.url_for('fg.bin')} -o {final}")
    assert final.stat().st_size == 6 * MiB
    lines = cell.lines
    assert 3 <= len(lines) <= 5, cell.rendered  # start, verify, done, the summary: a few lines per file
    assert lines[0].endswith("fg.bin start 6.0MiB")
    assert any(" done 6.0MiB " in line and "from http://127.0.0.1:" in line for line in lines), cell.rendered
    assert lines[-1] == f"downloaded {final}"
    # The progress line is rewritten in place about twice a second, not several times.
    assert cell.raw.count("\r") >= 3  # it did move
    assert len(cell.streams) <= 2.5 * cell.duration + 6, (len(cell.streams), cell.duration)


KERAS_CELL = """
%env KERAS_BACKEND=numpy
import keras.src.utils.file_utils as file_utils

def no_download(url, *args, **kwargs):
    raise AssertionError(f"Keras tried to download {url}")

file_utils.validate_file = lambda *args, **kwargs: True  # synthetic data cannot match the real hashes
file_utils.urlretrieve = no_download

import keras
(x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
(cx, cy), _ = keras.datasets.cifar10.load_data()
print("mnist", x_train.shape, "cifar10", cx.shape)
"""


def test_notebook_end_to_end_background_get_watch_wait_then_keras_loads_offline(kernel, origin, tmp_path):
    from tests import datasets_synth

    files = datasets_synth.build_files()
    datasets_synth.serve_files(origin, files)
    registry = datasets_synth.write_registry(tmp_path / "synth.toml", origin.url, files, names=["mnist", "cifar10"])
    origin.total_rate = 16 << 10  # a few seconds: the live view has something to show

    started = kernel.run(f"!prefetch get mnist cifar10 --registry {registry} -b")
    assert "started job j" in started.rendered, started.rendered

    watched = kernel.run("import prefetch\njobs = prefetch.watch(interval=0.5)\nprint([j.state for j in jobs])")
    assert watched.error is None, watched.error
    assert "['done']" in watched.rendered, watched.rendered
    first, *updates = watched.displays
    assert first["type"] == "display_data" and "<table" in first["data"]["text/html"]
    assert "mnist.npz" in first["data"]["text/plain"] and "cifar-10-python.tar.gz" in first["data"]["text/plain"]
    assert updates and all(u["type"] == "update_display_data" for u in updates)  # one output, updated in place
    assert " done " in updates[-1]["data"]["text/plain"]

    waited = kernel.run("!prefetch wait")
    assert " done (2 files in place)" in waited.rendered, waited.rendered

    shown = kernel.run("prefetch.status()")
    (result,) = [d for d in shown.displays if d["type"] == "execute_result"]
    assert "<table" in result["data"]["text/html"] and "cifar-10-python.tar.gz" in result["data"]["text/plain"]
    record = kernel.run("jobs[0]")
    (result,) = [d for d in record.displays if d["type"] == "execute_result"]
    assert result["data"]["text/plain"].startswith("<JobRecord j") and " done: 2 files" in result["data"]["text/plain"]

    origin.stop()  # from here on, nothing may be downloaded
    loaded = kernel.run(KERAS_CELL, timeout=300)
    assert loaded.error is None, loaded.error
    assert "mnist (" in loaded.rendered and "cifar10 (" in loaded.rendered, loaded.rendered


def test_ensure_and_wait_show_a_progress_bar_in_the_kernel(kernel, origin, tmp_path):
    origin.put("bar.bin", os.urandom(3 * MiB))
    origin.put("job.bin", os.urandom(3 * MiB))
    origin.total_rate = 1 * MiB  # about 3 s each
    final = tmp_path / "bar.bin"

    cell = kernel.run(f"import prefetch\nr = prefetch.ensure({origin.url_for('bar.bin')!r}, output={str(final)!r})")
    assert cell.error is None, cell.error
    assert final.stat().st_size == 3 * MiB
    last = cell.lines[-1]
    assert last.startswith("bar.bin: 100%") and "3.00M/3.00M" in last, cell.rendered  # tqdm's text bar, finished
    assert len(cell.lines) == 1, cell.rendered  # redrawn in place, not one line per update
    assert len(cell.streams) <= 2.5 * cell.duration + 4, (len(cell.streams), cell.duration)

    quiet = kernel.run(f"r = prefetch.ensure({origin.url_for('bar.bin')!r}, output={str(final)!r}, progress=False)")
    assert quiet.rendered.strip() == "", quiet.rendered  # cached, and no bar when asked for none

    kernel.run(f"job = prefetch.ensure({origin.url_for('job.bin')!r}, output={str(tmp_path / 'job.bin')!r}, "
               f"background=True)")
    waited = kernel.run("result = prefetch.wait()\nprint(result.jobs[0].state)")
    assert waited.error is None, waited.error
    assert any(line.startswith("waiting for j") and "100%" in line for line in waited.lines), waited.rendered
    assert waited.lines[-1] == "done"


def test_interrupting_wait_in_a_cell_says_the_job_keeps_running(kernel, origin, tmp_path):
    from prefetch.jobs import list_jobs

    origin.put("long.bin", os.urandom(16 * MiB))
    origin.total_rate = 256 << 10  # about a minute
    kernel.run(f"!prefetch get {origin.url_for('long.bin')} -o {tmp_path / 'long.bin'} -b")
    (job,) = list_jobs()
    try:
        cell = kernel.start("!prefetch wait")
        poll(lambda: kernel.poll(cell) or "waiting for j" in cell.rendered, what="wait's progress line")
        assert cell.ended is None, cell.rendered
        kernel.interrupt()
        poll(lambda: kernel.poll(cell), what="the cell to end", timeout=20)
        assert "the job keeps running in the background" in cell.rendered, cell.rendered
        assert "run the same command again to resume" not in cell.rendered
        # Only the waiting stopped: the job is still live (on a loaded machine it may not have
        # left "queued" yet), never cancelled or interrupted by the cell's interrupt.
        assert list_jobs()[0].state in ("queued", "running")
    finally:
        kernel.run(f"!prefetch cancel {job.id}")


def test_watch_updates_its_table_in_place_only_when_it_changed(kernel, tmp_path):
    """A job that makes no progress (its server accepts and never answers) leaves watch's table
    as it was: watch does not re-send the same table every interval (each update is a message
    the notebook stores and the browser renders)."""
    import socket

    from prefetch.jobs import list_jobs

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # connections complete in the kernel's backlog; no answer ever comes
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/stuck.bin"
    try:
        kernel.run(f"!prefetch get {url} -o {tmp_path / 'stuck.bin'} -b")
        (job,) = list_jobs()
        try:
            watched = kernel.run("import prefetch\njobs = prefetch.watch(interval=0.1, timeout=3)\n"
                                 "print([j.state for j in jobs])")
            assert watched.error is None, watched.error
            assert "['running']" in watched.rendered, watched.rendered
            first, *updates = watched.displays
            assert first["type"] == "display_data" and "stuck.bin" in first["data"]["text/plain"]
            # ~30 looks at the record; the table changes at most as the job starts its download.
            assert len(updates) <= 3, [u["data"]["text/plain"] for u in updates]
            texts = [first["data"]["text/plain"]] + [u["data"]["text/plain"] for u in updates]
            assert all(a != b for a, b in zip(texts, texts[1:])), texts  # each update shows something new
        finally:
            kernel.run(f"!prefetch cancel {job.id}")
    finally:
        silent.close()
