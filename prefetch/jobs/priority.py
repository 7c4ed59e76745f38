"""A background worker's manners: low CPU priority and the idle I/O class.

A ``-b`` job runs beside a training loop; by default it takes what the machine leaves
over. ``lower_priority`` is called by the worker before it starts any thread (Linux
keeps nice and the I/O class per thread, and new threads inherit them). The user turns
it off with ``prefetch get --no-nice`` or ``PREFETCH_NICE=0``.

Where the kernel groups processes by session (``CONFIG_SCHED_AUTOGROUP``, on by default in
Ubuntu's and Debian's kernels), nice ranks a thread only against the threads of its own
session's group, and the groups share the CPUs equally: a worker in a session of its own
(it is started with ``setsid``) at nice 19 still took half a core from a training loop in
the notebook's session. So the worker, a session leader, also sets its session group's nice
(``/proc/self/autogroup``) to 19; that group holds only the worker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from prefetch.errors import UsageError

NICE_ENV = "PREFETCH_NICE"
NICE_LEVEL = 19  # the lowest CPU priority
IOPRIO_CLASS_IDLE = 3  # only served when no other process wants the disk
IOPRIO_CLASS_SHIFT = 13
IOPRIO_WHO_PROCESS = 1
# ioprio_set/ioprio_get have no libc wrapper: syscall numbers per architecture.
_IOPRIO_SYSCALLS = {"x86_64": (251, 252), "aarch64": (30, 31), "i686": (289, 290), "i386": (289, 290),
                    "ppc64le": (273, 274), "s390x": (282, 283), "riscv64": (30, 31)}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def nice_from_env(env: Mapping[str, str]) -> bool:
    """Whether background jobs run politely, per ``PREFETCH_NICE`` (default: yes).

    Raises:
        UsageError: the variable holds something other than 1/0, true/false, yes/no, on/off.
    """
    value = env.get(NICE_ENV, "").strip().lower()
    if not value or value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise UsageError(f"{NICE_ENV}={env.get(NICE_ENV)!r}: expected 1 or 0 (background jobs at low priority or not)")


def lower_priority() -> str:
    """Lower this thread's CPU priority to nice 19 and its I/O class to idle; what was done, for the log.

    Neither step is fatal: a platform without them keeps running at normal priority.
    """
    done = []
    try:
        current = os.getpriority(os.PRIO_PROCESS, 0)
        if current < NICE_LEVEL:
            os.setpriority(os.PRIO_PROCESS, 0, NICE_LEVEL)
        done.append(f"nice {os.getpriority(os.PRIO_PROCESS, 0)}")
    except (AttributeError, OSError) as exc:
        done.append(f"nice unchanged ({exc})")
    group = set_group_nice()
    if group is not None:
        done.append(group)
    error = set_io_idle()
    done.append("I/O class idle" if error is None else f"I/O class unchanged ({error})")
    return ", ".join(done)


def set_group_nice(path: str = "/proc/self/autogroup") -> str | None:
    """Set this session's scheduling group (autogroup) to nice 19; what was done, None if there is none.

    Only a session leader does it: its group was made for its session by ``setsid``, so the
    setting reaches no process but its own (and its children). Raising the group's nice
    needs no privilege.
    """
    try:
        if os.getsid(0) != os.getpid():
            return None
        return raise_group_nice(path)
    except (AttributeError, OSError, ValueError) as exc:
        return f"session group nice unchanged ({exc})"


def raise_group_nice(path: str) -> str | None:
    """Raise the scheduling group at ``path`` to nice 19; None when the process is in no such group.

    The file is missing on a kernel built without autogroup, and empty when the process's CPU
    share is set by a cgroup instead (a container's ``cpu`` controller): nice alone then ranks
    its threads against the others in that cgroup.
    """
    try:
        with open(path, "r+", encoding="ascii") as group:  # "/autogroup-N nice K"
            words = group.read().split()
            if not words:
                return None
            if int(words[-1]) < NICE_LEVEL:
                group.seek(0)
                group.write(str(NICE_LEVEL))
        with open(path, encoding="ascii") as group:
            words = group.read().split()
    except FileNotFoundError:
        return None
    return f"session group nice {int(words[-1])}" if words else None


def set_io_idle() -> str | None:
    """Put this thread in the idle I/O class; None when done, else why not."""
    numbers = _IOPRIO_SYSCALLS.get(os.uname().machine) if sys.platform.startswith("linux") else None
    if numbers is None:
        return "no ioprio_set on this platform"
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    value = IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT
    if libc.syscall(numbers[0], IOPRIO_WHO_PROCESS, 0, value) != 0:
        return os.strerror(ctypes.get_errno())
    return None
