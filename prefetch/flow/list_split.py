"""A long list from a near host on both cores: the second half of its files in a forked process.

The bulk lane (``flow/file_batch.py``) runs on one thread, and a process's Python runs on one
core at a time (the interpreter lock): on loopback, 2,000 small files kept one core busy while
the other idled apart from nginx. ``fetch_files`` of a long list (:data:`FEWEST` files or more),
in a process that has no other thread yet, forks once at its start, before any file starts
(a fork with no other thread holds no lock another thread held). The child waits. When the
parent's lane takes its first chunk (the host has answered and is near), the parent gives the
child the second half of the files not started (:meth:`Split.offer`): those files are then
claimed (the parent's scheduler skips them) and the child runs them through ``fetch_files`` as
a run of its own, with its own connections (the connection budget is still one per host for
the user's processes: ``engine/shared_budget.py``) and the same locks, checks, flushes and
renames. Its events and results come back to the parent over a pipe, in batches, and reach the
parent's event sink and ``on_file_done`` as the parent's own files' do (one log line a file,
one result a file), with a note naming the child's pid.

When the host is not near, the lane is off, or the run ends before the lane starts, the child
is told ``no`` and exits (it cost a fork). Never in a background job (``FetchOptions.job``, or
a process at a nice value above 0: a job beside training keeps to one core), nor where another
thread exists (a notebook's kernel, the Python API in a threaded program), nor with one CPU.
``PREFETCH_SPLIT=0`` turns it off.

A stop reaches the child: the parent's ``stop`` (Ctrl-C, ``--fail-fast``) is written to the
child's control pipe within :data:`POLL` seconds; the child's interrupted or failed files stop
the parent in turn, as the parent's own would. A parent that dies (SIGKILL) closes that pipe:
the child stops its files and exits (after :data:`GRACE` seconds at most). The child ignores
SIGINT (a terminal's Ctrl-C reaches the parent, which stops it) and stops on SIGTERM.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import threading
from typing import Callable

FEWEST = 600  # files a list needs before it is split
REST = 512  # files not started yet, at the lane's first chunk, for a split (the child's half: two chunks)
POLL = 0.05  # seconds between the parent reader's looks at its stop
GRACE = 3.0  # seconds a child whose parent is gone has to stop its files before it exits anyway
BATCH = 48  # messages the child sends at once (one pickle and one write each)
_HEAD = struct.Struct("!I")


def _enabled(options, count: int) -> bool:
    if count < FEWEST or options.job is not None or options.handed or options.sources is not None:
        return False
    if os.environ.get("PREFETCH_SPLIT", "1").strip().lower() in ("0", "no", "false", "off"):
        return False
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        if len(os.sched_getaffinity(0)) < 2 or os.getpriority(os.PRIO_PROCESS, 0) > 0:
            return False
    except (AttributeError, OSError):
        return False
    return True


class Split:
    """The parent's side: the forked child, what it was given, its results read back."""

    @classmethod
    def start(cls, plans, options, *, run: Callable) -> Split | None:
        """Fork the child when the list may be split (None otherwise). ``run(plans, on_event,
        on_file_done, stop)`` is what the child runs on its files: ``fetch_files`` on them."""
        if not _enabled(options, len(plans)):
            return None
        ctl_r, ctl_w = os.pipe()
        up_r, up_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (ctl_r, ctl_w, up_r, up_w):
                os.close(fd)
            return None
        if pid == 0:  # pragma: no cover - the child (its coverage is not collected: it ends with os._exit)
            os.close(ctl_w)
            os.close(up_r)
            _child(ctl_r, up_w, plans, run)
        os.close(ctl_r)
        os.close(up_w)
        split = cls(pid, ctl_w, up_r, plans)
        split.fail_fast = bool(options.fail_fast)
        return split

    def __init__(self, pid: int, ctl: int, up: int, plans) -> None:
        self.pid, self.ctl, self.up, self.plans = pid, ctl, up, plans
        self.first: int | None = None  # the child's first file, once it was given its files
        self.reported: set[int] = set()
        self.reader: threading.Thread | None = None
        self.told = False  # the child was told go or no

    def offer(self, index: int, claimed: set[int], same_host: Callable[[int], bool], *, stop, on_event,
              finish, failed) -> None:
        """The parent's lane took its first chunk at ``index`` (under its lock): give the child the
        second half of the files from there when none is claimed yet and the last one is of the
        same host (``same_host(i)``); they are added to ``claimed``. ``finish(i, result)`` keeps a
        child's result, ``failed(i, message)`` one it never reported."""
        if self.told:
            return
        count = len(self.plans)
        rest = count - index
        first = index + rest // 2
        if rest < REST or stop.is_set() or any(i in claimed for i in range(first, count)) \
                or not same_host(first) or not same_host(count - 1):
            return
        from prefetch.model.events import Event, EventKind

        claimed.update(range(first, count))
        self.first = first
        self._tell(b"go %d\n" % first)
        on_event(Event(EventKind.NOTE, "prefetch", message=f"files {first + 1}-{count} on a second "
                       f"process (pid {self.pid}), files 1-{first} here"))
        self.reader = threading.Thread(target=self._read, args=(stop, on_event, finish, failed),
                                       name="prefetch-split-reader", daemon=True)
        self.reader.start()

    def _tell(self, line: bytes) -> None:
        self.told = True
        try:
            os.write(self.ctl, line)
        except OSError:  # (the child is gone: its files are reported as not run, below)
            pass

    def _read(self, stop, on_event, finish, failed) -> None:
        buf = b""
        stopped = False
        try:
            while True:
                if not stopped and stop.is_set():
                    stopped = True
                    self._tell(b"stop\n")
                ready, _, _ = select.select([self.up], [], [], POLL)
                if not ready:
                    continue
                data = os.read(self.up, 1 << 16)
                if not data:
                    return
                buf += data
                while len(buf) >= _HEAD.size:
                    size = _HEAD.unpack_from(buf)[0]
                    if len(buf) < _HEAD.size + size:
                        break
                    batch = pickle.loads(buf[_HEAD.size:_HEAD.size + size])
                    buf = buf[_HEAD.size + size:]
                    for kind, at, item in batch:
                        if kind == "e":
                            if item.kind == "failed" and (item.exit_code == 7 or self.fail_fast):
                                stop.set()  # (as the parent's own failed file: before its failure is said)
                            on_event(item)
                        else:
                            self.reported.add(at)
                            finish(at, item)
        finally:
            for at in range(self.first, len(self.plans)):
                if at not in self.reported:
                    failed(at, f"{self.plans[at].label}: not started (the second process ended first)")

    fail_fast = False

    def close(self) -> None:
        """The parent's run is over: the child told ``no`` if it was given nothing, its results
        all read, the child reaped."""
        if not self.told:
            self._tell(b"no\n")
        if self.reader is not None:
            self.reader.join()
        for fd in (self.ctl, self.up):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _child(ctl: int, up: int, plans, run: Callable) -> None:  # pragma: no cover - runs in the forked child
    """The child's whole life: wait to be told, run its files, send back what happened, exit."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the terminal's Ctrl-C: the parent stops us)
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # (never prints; a cell or pipe reading the parent's output ends with the parent)
            os.dup2(quiet, fd)
        os.close(quiet)
        line = _line(ctl)
        if not line.startswith(b"go "):
            os._exit(0)
        first = int(line.split()[1])
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        out = _Sender(up)
        threading.Thread(target=_watch_parent, args=(ctl, stop, out), name="prefetch-split-watch",
                         daemon=True).start()

        def on_event(event) -> None:
            if not event.files:  # (the run's own "N files" note: the parent's run said it)
                out.put(("e", 0, event))

        run(plans[first:], on_event, lambda i, result: out.put(("r", first + i, result)), stop)
        out.flush()
    except BaseException:  # noqa: BLE001 - whatever happens here, the child never returns into the parent's code
        code = 1
    finally:
        os._exit(code)


def _line(fd: int) -> bytes:  # pragma: no cover - in the child
    got = b""
    while not got.endswith(b"\n"):
        data = os.read(fd, 64)
        if not data:
            return got
        got += data
    return got


def _watch_parent(ctl: int, stop: threading.Event, out: _Sender) -> None:  # pragma: no cover - in the child
    """``stop`` or the parent gone (its end of the pipe closed): the child's files stop; the
    messages held are sent every ``POLL`` seconds meanwhile."""
    while True:
        ready, _, _ = select.select([ctl], [], [], POLL)
        out.flush()
        if ready:
            try:
                data = os.read(ctl, 64)
            except OSError:
                data = b""
            stop.set()
            if not data:  # the parent is gone: stop, then go whatever is still running
                threading.Timer(GRACE, os._exit, args=(7,)).start()
                return


class _Sender:  # pragma: no cover - in the child
    """The child's messages to the parent, in batches of :data:`BATCH` (and every ``POLL`` s)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.held, self.lock = fd, [], threading.Lock()

    def put(self, message) -> None:
        with self.lock:
            self.held.append(message)
            if len(self.held) >= BATCH:
                self._send()

    def flush(self) -> None:
        with self.lock:
            if self.held:
                self._send()

    def _send(self) -> None:
        data = pickle.dumps(self.held, protocol=pickle.HIGHEST_PROTOCOL)
        self.held = []
        view = memoryview(_HEAD.pack(len(data)) + data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:  # (the parent is gone: nobody to tell)
            pass
