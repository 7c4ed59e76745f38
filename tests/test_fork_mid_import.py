"""A process forked while one of prefetch's download threads is inside a lazy import (a torch
DataLoader worker, a ``multiprocessing`` "fork" pool, forked by the main thread while
``as_completed`` downloads): the child's own downloads must run.

CPython's per-module import locks are not reset in a forked child: a module a thread of the
parent was importing at the fork stays locked there by a thread that does not exist, and
the child's own first import of it waited for ever (its ``prefetch.ensure`` never returned).
The test makes that window wide and certain: in the parent only, a ``sys.meta_path`` finder
holds a download thread's import of ``http.client`` (under its module lock, as a slow disk
would) and says when it does; the main thread forks then.
"""

from __future__ import annotations

import os
import subprocess
import sys

MiB = 1 << 20

PARENT = r"""
import importlib.abc, multiprocessing, os, sys, threading, time

SLOW = "http.client"
parent = os.getpid()
entered = threading.Event()


class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == SLOW and os.getpid() == parent and threading.current_thread() is not threading.main_thread():
            entered.set()
            time.sleep(4)  # (the import's module lock is held meanwhile: the fork comes now)
        return None


sys.meta_path.insert(0, Slow())
import prefetch

assert SLOW not in sys.modules, "the test needs a module the download threads import first"
big_url, out_dir, small_url, small_out = sys.argv[1:5]


def child():  # a DataLoader worker: its own small file
    prefetch.ensure(small_url, output=small_out, progress=False)
    print("child ok", flush=True)


stream = prefetch.as_completed([big_url], output_dir=out_dir, progress=False)
print("thread importing:", entered.wait(60), flush=True)
worker = multiprocessing.get_context("fork").Process(target=child)
worker.start()
worker.join(60)
hung = worker.is_alive()
if hung:
    worker.kill()
    worker.join()
print("parent got", [p.name for p in stream], flush=True)
print("child hung" if hung else f"child exit {worker.exitcode}", flush=True)
"""


def test_a_child_forked_during_a_download_threads_import_downloads(origin, home, tmp_path):
    origin.put("big.bin", os.urandom(2 * MiB))
    origin.put("small.bin", os.urandom(1000))
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = subprocess.run([sys.executable, str(script), origin.url_for("big.bin"), str(tmp_path / "out"),
                           origin.url_for("small.bin"), str(tmp_path / "small.bin")],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "thread importing: True" in lines  # (the fork came while the thread held the import)
    assert "child ok" in lines and "child exit 0" in lines, proc.stdout + proc.stderr[-3000:]
    assert "parent got ['big.bin']" in lines
    assert (tmp_path / "small.bin").stat().st_size == 1000
