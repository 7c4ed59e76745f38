"""Store calls a stopped run leaves behind instead of waiting for them.

botocore cannot be interrupted: a request to a store that accepted the connection and never
answers blocks its thread until the read timeout (times botocore's retries). A run that is
stopped (a streaming loop left early, Ctrl-C) must end within about a second, so the calls the
run makes to the store before and after a file go on a daemon thread of their own; the run
waits for their answer or for its stop, whichever comes first. A call left behind finishes on
its own, and what it would hand back is dropped: ``on_abandoned`` undoes what it did for the
run (a claim it took is released), and nothing is downloaded or placed from it.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

T = TypeVar("T")
THREAD_NAME = "prefetch-store-call"
POLL = 0.05  # seconds between looks at the stop while the store has not answered
# A store that answers gets this long after the stop (a claim's release, a HEAD under way), so
# that a stopped run does not leave a claim for the lease to end only because it did not wait.
GRACE = 0.5


class Abandoned(Exception):
    """The run stopped before the store answered; the call goes on without it."""


def call_or_abandon(call: Callable[[], T], stop: threading.Event | None, *,
                    on_abandoned: Callable[[T], None] | None = None) -> T:
    """``call()``'s result (or its exception), unless ``stop`` is set first.

    Raises:
        Abandoned: ``stop`` was set and ``call`` did not end within ``GRACE`` seconds of it;
        ``on_abandoned`` gets its result once it ends (not when it raises).
    """
    if stop is None:
        return call()
    lock = threading.Lock()
    box: dict = {}
    done = threading.Event()

    def run() -> None:
        try:
            value = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting run
            with lock:
                box["error"] = exc
            done.set()
            return
        with lock:
            left = box.get("abandoned", False)
            box["value"] = value
        done.set()
        if left and on_abandoned is not None:
            try:
                on_abandoned(value)
            except Exception:  # noqa: BLE001 - nothing is waiting to hear of it
                pass

    threading.Thread(target=run, name=THREAD_NAME, daemon=True).start()
    stopped_at = None
    while not done.wait(POLL):
        if stop.is_set():
            now = time.monotonic()
            stopped_at = now if stopped_at is None else stopped_at
            if now - stopped_at < GRACE:
                continue
            with lock:
                if "value" not in box and "error" not in box:
                    box["abandoned"] = True
                    raise Abandoned
            break
    if "error" in box:
        raise box["error"]
    return box["value"]
