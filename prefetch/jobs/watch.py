"""``prefetch.watch``: the jobs' table, updated in place until none of them runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from prefetch.errors import UsageError
from prefetch.ui.progress import in_kernel


def check_interval(interval: float) -> float:
    """Return ``interval`` (seconds between looks) if it is one.

    Raises:
        UsageError: not a number, NaN, or not above zero (0 would read the records without a pause).
    """
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval < float("inf"):
        raise UsageError(f"invalid interval {interval!r:.40}: expected seconds, above 0")
    return interval


def watch_jobs(ids: Sequence[str] | None, *, interval: float = 1.0, timeout: float | None = None):
    """``prefetch.watch``: a job table updated in place until no job runs (see api.watch)."""
    from prefetch.jobs import list_jobs
    from prefetch.jobs.liveness import reread_jobs
    from prefetch.jobs.records import check_timeout
    from prefetch.jobs.views import JobList, text_table

    check_interval(interval)
    check_timeout(timeout)
    if ids is None:
        everything = list_jobs()
        ids = [r.id for r in everything if r.active] or [r.id for r in everything[-1:]]

    last: dict = {}  # job id -> its record as last read

    def current() -> JobList:
        return JobList(reread_jobs(ids, last))

    records = current()
    deadline = None if timeout is None else time.monotonic() + timeout
    handle = None
    if in_kernel():
        from IPython.display import display

        handle = display(records, display_id=True)
    else:
        print(text_table(records), flush=True)
    shown = text_table(records)
    printed_at = time.monotonic()
    try:
        while any(r.active for r in records):
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(interval)
            records = current()
            text = text_table(records)
            if handle is not None:
                if text != shown:  # the same table again would only grow the notebook's message stream
                    handle.update(records)
            elif text != shown and (time.monotonic() - printed_at >= max(interval, 5.0) or
                                    not any(r.active for r in records)):
                print(text, flush=True)
                printed_at = time.monotonic()
            shown = text
    except KeyboardInterrupt:
        print("stopped watching; the jobs keep running (prefetch.status(), prefetch.wait())", file=sys.stderr)
    return records
