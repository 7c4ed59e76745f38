"""A kernel interrupt in a real Jupyter kernel stops ``as_completed``'s downloads, resumable,
wherever the cell was: inside the training step or waiting for the next file."""

from __future__ import annotations

import hashlib
import os
import time

from prefetch.cache.layout import part_path, state_path
from tests.test_jobs import poll
from tests.test_stream import on_disk

MiB = 1 << 20


def interrupt_and_check(kernel, cell, origin, out, names, *, error: str) -> None:
    """Interrupt the running cell; it ends with ``error``, nothing downloads any more, and no
    request starts after the interrupt plus a grace second (the origin's log)."""
    assert cell.ended is None, cell.rendered
    kernel.interrupt()
    interrupted = time.monotonic()
    poll(lambda: kernel.poll(cell), what="the cell to end", timeout=20)
    assert cell.error is not None and cell.error["ename"] == error, cell.rendered
    time.sleep(1.0)
    kept = on_disk(out, names)
    time.sleep(1.0)
    assert on_disk(out, names) == kept  # nothing downloads any more
    assert not [r for r in origin.requests if r.started > interrupted + 1.0]


def test_kernel_interrupt_in_the_training_loop_stops_the_downloads(kernel, origin, tmp_path):
    names = [f"shard-{i}.bin" for i in range(5)]
    blobs = {n: os.urandom(MiB if i else 64 << 10) for i, n in enumerate(names)}
    for name, data in blobs.items():
        origin.put(name, data)
    origin.total_rate = 512 << 10  # ~10 s for the set: the interrupt comes long before
    out = tmp_path / "out"
    entries = [{"url": origin.url_for(n), "sha256": hashlib.sha256(blobs[n]).hexdigest()} for n in names]
    code = (
        "import prefetch, time\n"
        f"for path in prefetch.as_completed([], urls={entries!r}, output_dir={str(out)!r}, connections=1, "
        "progress=False):\n"
        "    print('got', path.name, flush=True)\n"
        "    time.sleep(30)  # a long training step on it\n"
    )
    cell = kernel.start(code)
    poll(lambda: kernel.poll(cell) or "got shard-0.bin" in cell.rendered, what="the first path", timeout=60)
    poll(lambda: part_path(out / names[1]).exists() and state_path(out / names[1]).exists(),
         what="shard-1 in flight", timeout=30)
    interrupt_and_check(kernel, cell, origin, out, names, error="KeyboardInterrupt")  # raised in the user's code
    for name in names[1:]:  # nothing half-placed; what was in flight resumable
        assert not (out / name).exists()
        assert part_path(out / name).exists() == state_path(out / name).exists()
    assert part_path(out / names[1]).exists()

    origin.total_rate = None
    again = kernel.run(
        "print([p.name for p in prefetch.as_completed([], urls=" + repr(entries) + f", output_dir={str(out)!r}, "
        "progress=False)])")
    assert again.error is None, again.rendered
    assert str(names) in again.rendered
    assert all((out / n).read_bytes() == blobs[n] for n in names)


def test_kernel_interrupt_while_waiting_for_the_next_file(kernel, origin, tmp_path):
    origin.put("slow.bin", os.urandom(4 * MiB))
    origin.total_rate = 256 << 10
    out = tmp_path / "out"
    code = (
        "import prefetch\n"
        f"paths = prefetch.as_completed({origin.url_for('slow.bin')!r}, output_dir={str(out)!r}, progress=False)\n"
        "for path in paths:\n"
        "    pass\n"
    )
    cell = kernel.start(code)
    poll(lambda: kernel.poll(cell) or on_disk(out, ["slow.bin"]) >= 256 << 10, what="bytes on disk")
    interrupt_and_check(kernel, cell, origin, out, ["slow.bin"], error="InterruptedTransferError")  # as ensure
    assert not (out / "slow.bin").exists() and state_path(out / "slow.bin").exists()
    # The stream is still referenced by `paths`: it ended cleanly, and closing it is harmless.
    again = kernel.run("paths.close(); paths.close(); print(repr(paths))")
    assert again.error is None and "closed" in again.rendered, again.rendered
