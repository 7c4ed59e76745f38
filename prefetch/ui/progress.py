"""Progress for the Python API: tqdm.auto bars and a live job table (``watch``).

In a notebook kernel tqdm.auto draws a widget where ipywidgets is installed and
a text bar otherwise (redrawn at most twice a second); on a terminal a text bar;
in a log file or with ``PREFETCH_PLAIN=1`` nothing. tqdm and IPython are
imported only when a bar or a view is made.
"""

from __future__ import annotations

import sys
import threading

from prefetch.model.events import Event, EventKind


def in_kernel() -> bool:
    """True inside a Jupyter (ipykernel) kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - any failure means "not a kernel"
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def progress_wanted() -> bool:
    """Bars by default in a kernel or on a terminal; never with PREFETCH_PLAIN or in a log file."""
    from prefetch.ui.style import is_plain

    if is_plain():
        return False
    if in_kernel():
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _tqdm():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "IProgress not found": the text bar is fine
        from tqdm.auto import tqdm
    return tqdm


class ProgressBar:
    """One bar for a foreground ``ensure``: bytes of every file together (an event sink).

    Running sums, not a sum over every file per event: with thousands of files an
    event costs the same as with one. With many files the description counts them
    (``12/2000 files``).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bar = None
        self.files: dict[str, tuple[int, int | None]] = {}
        self.done = 0  # sum of the files' done bytes
        self.total = 0  # sum of the known totals
        self.known = 0  # files whose total is known
        self.finished: set[str] = set()

    def __call__(self, event: Event) -> None:
        if event.kind not in (EventKind.START, EventKind.PROGRESS, EventKind.DONE, EventKind.CACHED,
                              EventKind.VERIFY):
            return
        with self.lock:
            old_done, old_total = self.files.get(event.file, (0, None))
            self.files[event.file] = (event.done, event.total)
            self.done += event.done - old_done
            if old_total is not None:
                self.total -= old_total
                self.known -= 1
            if event.total is not None:
                self.total += event.total
                self.known += 1
            if event.kind in (EventKind.DONE, EventKind.CACHED):
                self.finished.add(event.file)
            done = self.done
            total = self.total if self.known else None
            if self.bar is None:
                self.bar = _tqdm()(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                                   mininterval=0.5, desc=event.file, leave=True)
            count = len(self.files)
            desc = event.file if count == 1 else (
                f"{count} files" if count <= 8 else f"{len(self.finished)}/{count} files")
            if self.bar.desc != desc:
                self.bar.set_description_str(desc, refresh=False)
            if total is not None and self.bar.total != total:
                self.bar.total = total
                if count <= 8:  # with many files starting, the next rate-limited redraw shows it
                    self.bar.refresh()
            self.bar.update(max(0, done - self.bar.n))

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()


class JobsBar:
    """A bar for ``wait``: the running jobs' bytes together (``wait_for``'s ``on_poll``)."""

    def __init__(self) -> None:
        self.bar = None

    def __call__(self, records) -> None:
        done = sum(r.bytes for r in records)
        totals = [r.total for r in records]
        total = sum(totals) if totals and all(t is not None for t in totals) else None  # type: ignore[arg-type]
        if self.bar is None:
            if not any(r.active for r in records):
                return  # nothing to wait for: no bar at all
            ids = ", ".join(r.id for r in records)
            self.bar = _tqdm()(total=total, unit="B", unit_scale=True, unit_divisor=1024, mininterval=0.5,
                               desc=f"waiting for {ids}", leave=True)
        if total is not None and self.bar.total != total:
            self.bar.total = total
            self.bar.refresh()
        self.bar.update(max(0, done - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


