"""Ctrl-C (SIGINT, a notebook kernel's interrupt) for a foreground download.

The first interrupt only sets the transfer's ``stop`` event: every read ends
within about a second, the resume state is saved, a file already complete is
still verified and put in place (an archive's extraction ends, its archive kept as a
complete ``.part``), and the caller gets its results (the others
marked ``interrupted``, exit 7). A second interrupt stops at once: the bytes on
disk stay resumable (only ranges already synced are recorded as done).

Python runs signal handlers on the main thread only, and only the main thread may install
one. An ``ensure`` on another thread (a thread pool in a notebook cell, a DataLoader's worker
thread) registers its ``stop`` with the chained handler (:func:`chain_interrupt`'s) instead, and
in a notebook kernel :func:`arm_kernel_cells` (run at ``import prefetch`` there) puts that handler
in front of each cell's own for the cell's run: the stop button sets every such ``stop`` and then
does what it did before (the cell's ``KeyboardInterrupt``).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def stop_on_interrupt(
    stop: threading.Event,
    *,
    on_second: Callable[[], None] | None = None,
    on_first: Callable[[], None] | None = None,
    hangup: bool = False,
    terminate: bool = False,
    restore: bool = True,
) -> Iterator[threading.Event]:
    """While inside, SIGINT sets ``stop``; a second SIGINT calls ``on_second`` (default: KeyboardInterrupt).

    Args:
        on_first: called (in the signal handler) after the first SIGINT has set ``stop``.
        hangup: SIGHUP sets ``stop`` too (a notebook cell's shell is hung up right
            after its Ctrl-C; the download should stop cleanly, not die mid-write).
        terminate: SIGTERM sets ``stop`` too.
        restore: put the previous handlers back on the way out. A CLI that exits
            right after passes False: the outcome is decided, so later interrupts are
            ignored (Python's exit would otherwise die of one, status -2, not 7).

    Outside the main thread (where no handler can be installed) ``stop`` is set by the chained
    handler while inside (:func:`arm_kernel_cells`: a notebook kernel's cells have it), and only
    the first interrupt counts: the second is the main thread's, whatever it is doing.
    """
    if threading.current_thread() is not threading.main_thread():
        arm_kernel_cells()  # (``import prefetch`` did, unless IPython came after it: the next cells then)
        with _chain_lock:
            _chained.append(stop)
        try:
            yield stop
        finally:
            _unchain(stop)
        return
    interrupts = [0]

    def on_interrupt(signum, frame) -> None:
        interrupts[0] += 1
        if interrupts[0] >= 2:
            if on_second is not None:
                on_second()
            raise KeyboardInterrupt
        stop.set()
        if on_first is not None:
            on_first()

    def on_other(signum, frame) -> None:
        stop.set()

    previous = {signal.SIGINT: signal.signal(signal.SIGINT, on_interrupt)}
    try:
        if hangup and hasattr(signal, "SIGHUP"):
            previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_other)
        if terminate:
            previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_other)
        yield stop
    finally:
        for signum, handler in previous.items():
            if not restore:
                handler = signal.SIG_IGN
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def interrupt_on_hangup() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``KeyboardInterrupt`` as Ctrl-C does.

    For a command that only watches (``prefetch wait``, ``prefetch log -f``): a closed
    terminal or a killed cell ends it with the same one line and exit code as Ctrl-C,
    not a silent death by signal. The handlers before are put back on the way out, unless
    a signal came: the watcher's outcome is then decided (one line, exit 7), and SIGTERM,
    SIGHUP and SIGINT stay ignored, so a second signal while it says so cannot turn exit 7
    into a death by signal (``cli.main`` restores them for a caller that goes on).
    Outside the main thread it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = [name for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    fired = [False]

    def on_signal(signum, frame) -> None:
        if fired[0]:
            return
        fired[0] = True
        for name in (*names, "SIGINT"):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = {}
    try:
        for name in names:
            previous[getattr(signal, name)] = signal.signal(getattr(signal, name), on_signal)
        yield
    finally:
        if not fired[0]:
            for signum, handler in previous.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


# The stops of every open chain_interrupt (one handler for all of them, installed while any is
# open): streams closed in any order leave the handler as it was before the first one.
_chained: list[threading.Event] = []
_chain_previous: list = [None]  # the handler before ours
_chain_lock = threading.RLock()  # (re-entrant: a finaliser may close a stream while chaining one)
_armed: list = [False]  # arm_kernel_cells ran: each cell of the kernel gets the chained handler


def _on_chained_interrupt(signum, frame) -> None:
    for stop in list(_chained):
        stop.set()
    previous = _chain_previous[0]
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        raise KeyboardInterrupt


def chain_interrupt(stop: threading.Event) -> Callable[[], None]:
    """Until the returned function is called, SIGINT sets ``stop`` and then does what it did before.

    For downloads that run beside the caller's own code (``prefetch.as_completed``
    feeding a training loop): a kernel interrupt stops them at once, and the
    caller still gets its ``KeyboardInterrupt`` wherever it was. Several may be open
    at once and closed in any order: one handler sets all their stops, and the last
    one closed puts the previous handler back (only if ours is still the one
    installed). Calling the returned function again does nothing. Outside the main
    thread it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    with _chain_lock:
        if signal.getsignal(signal.SIGINT) is not _on_chained_interrupt:
            _chain_previous[0] = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, _on_chained_interrupt)
        _chained.append(stop)
    restored = [False]

    def restore() -> None:
        with _chain_lock:
            if restored[0]:
                return
            restored[0] = True
            _unchain(stop)
            if _chained or _armed[0]:  # (armed: the handler stays for the cell; it does nothing more then)
                return
            try:
                if signal.getsignal(signal.SIGINT) is _on_chained_interrupt:
                    previous = _chain_previous[0]
                    signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
                    _chain_previous[0] = None
            except ValueError:  # not the main thread (a finaliser): ours stays, setting no stop, until the next
                pass

    return restore


def _unchain(stop: threading.Event) -> None:
    with _chain_lock:
        if stop in _chained:  # (an Event equals only itself)
            _chained.remove(stop)


def arm_kernel_cells() -> bool:
    """In an IPython shell (a notebook kernel): each cell from now on runs with the chained
    SIGINT handler in front of its own, and so does the current one when this runs on the main
    thread. Without an ``ensure`` running on another thread it only passes the interrupt on (the
    cell's ``KeyboardInterrupt``); ipykernel puts its own handler back after each cell. Whether
    it is armed (False: not in IPython)."""
    import sys

    ipython = sys.modules.get("IPython")
    try:
        shell = ipython.get_ipython() if ipython is not None else None
    except Exception:  # noqa: BLE001 - any failure means "not in IPython"
        shell = None
    events = getattr(shell, "events", None)
    if events is None:
        return False
    with _chain_lock:
        if not _armed[0]:
            _armed[0] = True
            events.register("pre_run_cell", _arm_cell)
    if threading.current_thread() is threading.main_thread():
        _arm_cell()
    return True


def _arm_cell(*_info) -> None:
    """The chained handler in front of the cell's (IPython's ``pre_run_cell``, on the main thread;
    a cell of an ipykernel subshell runs on its own thread, where no handler can be installed)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _chain_lock:
        current = signal.getsignal(signal.SIGINT)
        if current is not _on_chained_interrupt:
            _chain_previous[0] = current
            signal.signal(signal.SIGINT, _on_chained_interrupt)


def is_interrupt(exc: BaseException) -> bool:
    """``exc`` is an interrupt (Ctrl-C, or SIGTERM/SIGHUP under ``interrupt_on_hangup``): a
    ``KeyboardInterrupt``, or the ``RuntimeError`` Python 3.11 raises from one that landed in a
    descriptor's ``__set_name__`` (a dataclass's ``field()`` while a lazily imported module
    defines its class: "Error calling __set_name__ on 'Field' instance")."""
    return isinstance(exc, KeyboardInterrupt) or (
        isinstance(exc, RuntimeError) and isinstance(exc.__cause__, KeyboardInterrupt))
