"""A seed claim's body: who holds the claim on a store object (host, pid, boot and pid
namespace, the process's start time), since when, and whether its holder is a process of this
machine that is gone (``store/seed.py`` takes, renews and releases the claims).
"""

from __future__ import annotations

import json
import os
import socket
import time


def claim_age(body: bytes, modified) -> tuple[dict, float]:
    """A claim's holder and seconds since its last renewal; a claim we cannot read (another
    tool's, truncated) ages from the store's Last-Modified, so that its lease ends too."""
    try:
        holder = json.loads(body)
        return holder, time.time() - float(holder["time"])
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        stamp = modified.timestamp() if hasattr(modified, "timestamp") else 0.0
        return {"host": "an unreadable claim"}, time.time() - stamp


def claim_body() -> bytes:
    """Who claims: host and pid, and what tells this machine's processes apart from another's
    with the same host name (boot id, pid namespace) and a reused pid (its start time)."""
    from prefetch.fs.processes import process_start_time

    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": time.time(),
                       "start": process_start_time(os.getpid()), "here": _here()}).encode()


def _here() -> str | None:
    """This machine's boot and pid namespace: pids in claims carrying the same are ours to check."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def dead_here(holder: dict) -> bool:
    """The claim is this machine's (same host, boot and pid namespace) and its process is gone:
    a seeder killed here (kill -9, a restarted kernel) need not be waited for until its lease ends."""
    from prefetch.fs.processes import is_process_alive

    here = _here()
    if here is None or holder.get("here") != here or holder.get("host") != socket.gethostname():
        return False
    pid, start = holder.get("pid"), holder.get("start")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    return not is_process_alive(pid, start if isinstance(start, int) else None)
