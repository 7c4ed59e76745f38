"""A host's warm connections while no file of it runs: their shared slots go to a process that waits.

A :class:`prefetch.engine.hosts.Host` keeps the connections its files ended with warm for the
next file of the host, and each holds one of the host's slots shared with the user's other
processes (``engine/shared_budget.py``). The processes with extra slots make room for one
that waits for its first connection from their transfers' loops; a process that is done with
the host for now (on to another host, extracting an archive, hashing) runs no such loop, and
the other process waited until its whole run ended (86 s in tests/test_review14_idle_slots.py).

So while a host has two warm connections or more and no transfer (:meth:`Host.leave` or a
client given back with none running), one daemon thread looks every ``LOOK`` seconds whether
another process waits (one ``fcntl``); if one does, the warm connections beyond one are closed
and their slots given back. The thread ends as soon as a file of the host runs again, the
host has fewer than two warm connections, or the run stops or closes the host.
"""

from __future__ import annotations

import threading


def watch_due(host) -> bool:
    """Whether warm connections hold ``host``'s slots while no file of it runs and no thread
    watches them yet; then one is to (``host.watching`` is set). Called with the host's lock held."""
    if host.shared is None or host.transfers or host.warm < 2 or host.watching:
        return False
    host.watching = True
    return True


def watch_idle(host) -> None:
    """Start the thread that watches ``host``'s idle slots (``host.watching`` is set already)."""
    threading.Thread(target=_watch, args=(host,), name="prefetch-idle-slots", daemon=True).start()


def _watch(host) -> None:
    from prefetch.engine.shared_budget import LOOK

    while True:
        stopped = host._stop.wait(LOOK)
        with host._lock:
            if stopped or host.transfers or host.warm < 2 or host.shared is None or host.shared.closed:
                host.watching = False
                return
            waits = not host.leased and not host.lent and host.shared.someone_waits()
        if waits:
            make_room(host)


def make_room(host) -> None:
    """Close ``host``'s warm connections beyond one and give their slots back (another process
    waits for its first connection to the host, and no file of it runs here)."""
    closing = []
    with host._lock:
        if host.transfers or host.leased or host.lent:
            return
        for clients in host._idle.values():
            while clients and host.warm - len(closing) > 1:
                closing.append(clients.pop())
        host.warm -= len(closing)
    for client in closing:
        client.close()
    with host._lock:
        host._fit_shared()  # (after the close: a slot never outlives its connection)
