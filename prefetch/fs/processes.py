"""Is a process alive, and is it still the same process (its start time from /proc)? And how
its threads spend their time (on a CPU, waiting for one: schedstat), and whether the machine's
CPUs are contended (the kernel's pressure stall information: :class:`CpuContention`).

Locks, job records and leftover temp files name the pid that owns them; these
checks tell a live owner from a dead one (or from a new process with a reused pid).
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot) from /proc; None if unknown."""
    info = _proc_stat(pid)
    return info[1] if info else None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[19])  # field 3 state, field 22 starttime
    except (IndexError, ValueError):
        return None


def is_process_alive(pid: int | None, start: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if ``start`` is given, is the same process."""
    if not pid or pid <= 0:
        return False
    if Path("/proc/self/stat").exists():
        info = _proc_stat(pid)
        if info is None:
            return False
        state, started = info
        if state in ("Z", "X", "x"):
            return False
        return start is None or started == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True



def cpu_and_wait() -> dict[int, tuple[float, float]] | None:
    """For each live thread of this process: seconds it ran on a CPU and seconds it waited,
    runnable, for one (the run queue), from ``/proc/self/task/*/schedstat``; None where the
    kernel does not keep them (not Linux, no schedstat). (Per thread: compare two of these
    over the threads in both, a thread that ended took its seconds with it.)"""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    seconds = {}
    for task in tasks:
        try:
            seconds[int(task)] = _schedstat(f"/proc/self/task/{task}/schedstat")
        except FileNotFoundError:
            continue  # (a thread that ended meanwhile)
        except (OSError, ValueError, IndexError):
            return None
    return seconds


def busy_seconds(tids: list[int]) -> dict[int, float] | None:
    """For each of this process's threads ``tids`` (native ids) still alive: its seconds on a CPU
    plus its seconds waiting, runnable, for one; a thread blocked (a socket, a lookup, a sleep)
    adds to neither. None where the kernel does not keep them."""
    seconds = {}
    for tid in tids:
        try:
            seconds[tid] = sum(_schedstat(f"/proc/self/task/{tid}/schedstat"))
        except FileNotFoundError:
            continue  # (it ended)
        except (OSError, ValueError, IndexError):
            return None
    return seconds


def thread_times() -> tuple[float, float] | None:
    """The calling thread's seconds on a CPU and seconds waiting, runnable, for one (its run
    queue wait), from ``/proc/thread-self/schedstat``; None where the kernel does not keep them."""
    try:
        return _schedstat("/proc/thread-self/schedstat")
    except (OSError, ValueError, IndexError):
        return None


def _schedstat(path: str) -> tuple[float, float]:
    with open(path, "rb") as fh:
        fields = fh.read().split()
    return int(fields[0]) / 1e9, int(fields[1]) / 1e9


def cpu_stall_seconds() -> float | None:
    """Seconds since boot during which some runnable task of the machine waited for a CPU: the
    kernel's pressure stall information (``/proc/pressure/cpu``, ``some ... total=`` in
    microseconds); None where the kernel keeps none (no PSI, or PSI turned off)."""
    try:
        with open("/proc/pressure/cpu", "rb") as fh:
            line = fh.readline()
        return int(line.rsplit(b"total=", 1)[1]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


class CpuContention:
    """Were the machine's CPUs contended lately: since this was made (a host's first request), or
    over the last two to four seconds once it is older?

    Contended: some task waited for a CPU over ``SHARE`` of the wall time looked at (a quiet
    machine: 0-5 %; one busy loop a core more than the machine has: near 100 %). The span looked
    at is never the few milliseconds between two answers, whose noise would decide either way.
    Where the kernel keeps no pressure information, the load average at or over the CPUs this
    process may use stands in (it lags a minute). One read of one /proc file a look."""

    SHARE = 0.25
    SPAN = 2.0  # seconds: the marks move on once the oldest is this old

    def __init__(self) -> None:
        self._mark = self._recent = (time.monotonic(), cpu_stall_seconds())

    def lately(self) -> bool:
        now = (time.monotonic(), cpu_stall_seconds())
        then, stalled = self._mark
        if now[0] - self._recent[0] >= self.SPAN:
            self._mark, self._recent = self._recent, now
        if stalled is None or now[1] is None:
            return _loaded()
        span = now[0] - then
        return span > 0 and now[1] - stalled >= self.SHARE * span


def _loaded() -> bool:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        return os.getloadavg()[0] >= cpus
    except OSError:  # (no load average either: what the caller did before it asked)
        return True
