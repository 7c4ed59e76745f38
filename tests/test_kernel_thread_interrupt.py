"""The notebook's stop button reaches an ``ensure()`` running on another thread (a thread pool in a
cell, a thread started in an earlier cell), in a real Jupyter kernel.

Python gives SIGINT to the main thread only: before, the cell's ``KeyboardInterrupt`` left the
worker downloading, and a ``with ThreadPoolExecutor()`` cell waited for the whole file (48 s
here) before it ended. Now the worker's transfer stops within about a second, its ``ensure``
raises ``InterruptedTransferError``, the ``.part`` stays resumable with nothing at the final
name, and the next ``ensure`` resumes it.
"""

from __future__ import annotations

import os

from tests.test_notebook import MiB, interrupt_when_bytes, on_disk, part_files, poll


def _slow_file(origin, name: str) -> bytes:
    data = os.urandom(24 * MiB)
    origin.put(name, data)
    origin.total_rate = 512 << 10  # 48 s for the whole file: an interrupt must not wait for it
    return data


def test_an_interrupt_stops_ensure_in_a_thread_pool(kernel, origin, tmp_path):
    data = _slow_file(origin, "pool.bin")
    final = tmp_path / "pool.bin"
    call = f"prefetch.ensure({origin.url_for('pool.bin')!r}, output={str(final)!r}, progress=False)"
    cell = kernel.start("import prefetch\nfrom concurrent.futures import ThreadPoolExecutor\n"
                        "with ThreadPoolExecutor(1) as pool:\n"
                        f"    future = pool.submit(lambda: {call})\n"
                        "    future.result()\n")
    interrupt_when_bytes(kernel, cell, [final])  # (the cell ends: the pool's exit waited for the worker)
    assert cell.error is not None and cell.error["ename"] == "KeyboardInterrupt", cell.error
    seen = kernel.run("print(type(future.exception()).__name__)")
    assert "InterruptedTransferError" in seen.rendered, seen.rendered
    assert not final.exists() and part_files(final)  # nothing unverified at the final name; resumable
    assert 0 < on_disk(final) < len(data)

    origin.total_rate = None
    again = kernel.run(f"{call}\nprint('resumed ok')")
    assert again.error is None and "resumed ok" in again.rendered, (again.error, again.rendered)
    assert final.read_bytes() == data


def test_an_interrupt_in_a_later_cell_stops_a_thread_started_before(kernel, origin, tmp_path):
    """A thread started in one cell downloads on while the next cells run; the stop button in
    one of them (the kernel was busy: the user stops everything) stops its transfer too."""
    _slow_file(origin, "thread.bin")
    final = tmp_path / "thread.bin"
    started = kernel.run("import prefetch, threading\nbox = {}\n"
                         "def work():\n"
                         "    try:\n"
                         f"        prefetch.ensure({origin.url_for('thread.bin')!r}, output={str(final)!r}, "
                         "progress=False)\n"
                         "    except BaseException as exc:\n"
                         "        box['error'] = exc\n"
                         "worker = threading.Thread(target=work)\nworker.start()\n")
    assert started.error is None, started.error
    cell = kernel.start("import time\nwhile worker.is_alive():\n    time.sleep(0.1)\n")
    interrupt_when_bytes(kernel, cell, [final])
    assert cell.error is not None and cell.error["ename"] == "KeyboardInterrupt", cell.error
    poll(lambda: not kernel.run("print(worker.is_alive())").rendered.strip().endswith("True"),
         what="the worker thread to end after the interrupt", timeout=20)
    seen = kernel.run("print(type(box.get('error')).__name__)")
    assert "InterruptedTransferError" in seen.rendered, seen.rendered
    assert not final.exists() and part_files(final)
