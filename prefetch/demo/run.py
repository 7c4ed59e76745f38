"""``prefetch demo``: the whole flow offline, against a built-in local origin.

A synthetic dataset (an archive to extract and a plain file) is served by a
local Range-capable origin on 127.0.0.1 that drops one connection mid-body.
The first download is interrupted halfway (as a closed notebook or a kill
would), the second resumes from the bytes on disk, verifies and extracts; the
third finds everything in place.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import tarfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.errors import ExitCode, too_many_open_files
from prefetch.model.events import Event, EventKind, EventSink, ignore_event
from prefetch.flow.options import FetchOptions
from prefetch.model.plans import FileResult
from prefetch.flow.file_list import fetch_files
from prefetch.cache.plans import plan_files
from prefetch.model.specs import DatasetSpec, FileSpec
from prefetch.engine.options import TransferOptions
from prefetch.model.specs import ExpectedHash

ARCHIVE = "demo-batches-py.tar.gz"
PLAIN = "demo-labels.bin"


@dataclass
class DemoStep:
    """One run of the flow and what came of it."""

    title: str
    results: list[FileResult]


@dataclass
class DemoReport:
    """Everything the demo did, for the CLI to show."""

    origin: str
    root: Path
    size: int  # bytes of the dataset
    bytes_served: int  # body bytes the origin sent in all
    steps: list[DemoStep] = field(default_factory=list)
    tree: list[tuple[str, int]] = field(default_factory=list)  # (path under root, size; -1 = dir)

    @property
    def ok(self) -> bool:
        last = self.steps[-1].results if self.steps else []
        return bool(last) and all(r.status in ("downloaded", "cached") for r in last)


def make_demo_files(*, seed: int = 7, members: int = 4, member_size: int = 1536 << 10) -> dict[str, bytes]:
    """A cifar-like archive (a folder of batches) and a plain file, deterministic."""
    rng = random.Random(seed)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        folder = tarfile.TarInfo("demo-batches-py")
        folder.type = tarfile.DIRTYPE
        folder.mode = 0o755
        tar.addfile(folder)
        for i in range(members):
            data = rng.randbytes(member_size)
            info = tarfile.TarInfo(f"demo-batches-py/data_batch_{i + 1}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return {ARCHIVE: buf.getvalue(), PLAIN: rng.randbytes(512 << 10)}


def demo_dataset(origin_url: str, files: dict[str, bytes]) -> DatasetSpec:
    """The registry entry for the demo files, laid out like cifar10 in Keras."""

    def sha(data: bytes) -> ExpectedHash:
        return ExpectedHash("sha256", hashlib.sha256(data).hexdigest())

    return DatasetSpec(
        name="demo",
        description="synthetic dataset served by the built-in local origin",
        files=(
            FileSpec(
                name=ARCHIVE,
                url=origin_url + ARCHIVE,
                target=ARCHIVE,
                expected=sha(files[ARCHIVE]),
                also=("demo-batches-py-target_archive",),
                extract=(".", "demo-batches-py-target"),
            ),
            FileSpec(name=PLAIN, url=origin_url + PLAIN, target=PLAIN, expected=sha(files[PLAIN])),
        ),
        source="demo",
    )


def run_demo(root: Path, *, on_event: EventSink = ignore_event, rate: int = 2 << 20) -> DemoReport:
    """Run the demo into the Keras root ``root`` (a temporary dir, normally).

    While it runs, 127.0.0.1 is in ``no_proxy`` (``_direct_to``) and, in the main thread, SIGINT
    is held: a Ctrl-C stops the step under way and raises ``KeyboardInterrupt`` after it.
    """
    from prefetch.demo.origin import CloseAfter, OriginServer
    from prefetch.ui.interrupt import stop_on_interrupt

    files = make_demo_files()
    size = sum(len(b) for b in files.values())
    state = root / ".prefetch-state"
    with OriginServer() as origin, _direct_to("127.0.0.1"):
        for name, data in files.items():
            origin.put(name, data)
        origin.rate = rate  # per connection, like a throttling CDN
        origin.add_fault(CloseAfter(n=1 << 20, path=ARCHIVE))  # one dropped connection
        plans = plan_files(demo_dataset(origin.url, files), root=root)
        options = FetchOptions(
            # Two connections keep the demo slow enough to interrupt it halfway.
            transfer=TransferOptions(connections=2, backoff_base=0.2, backoff_cap=1.0, min_split=256 << 10),
            max_parallel_files=2,
        )
        report = DemoReport(origin=origin.url, root=root, size=size, bytes_served=0)

        def fetch(title: str, stop: threading.Event | None, sink: EventSink) -> None:
            on_event(Event(EventKind.NOTE, "demo", message=title))
            results = fetch_files(
                plans,
                options=options,
                state=state,
                on_event=sink,
                stop=stop,
            )
            report.steps.append(DemoStep(title, results))
            if any(r.exit_code == ExitCode.FILESYSTEM and "too many open files" in (r.error or "") for r in results):
                raise too_many_open_files()  # (`ulimit -n 12`) one line, not a report of three failed steps

        stop = threading.Event()
        half = len(files[ARCHIVE]) // 2

        def interrupt_halfway(event: Event) -> None:
            on_event(event)
            if event.file == ARCHIVE and event.kind is EventKind.PROGRESS and event.done >= half:
                stop.set()

        # The user's own Ctrl-C ends the demo. The engine takes one as "stop this run, resumable"
        # and returns, so without this it read as the first step's planned stop and the demo went on.
        user = threading.Event()
        with stop_on_interrupt(user, on_first=stop.set):
            for title, step_stop, sink in (
                ("1. download, interrupted halfway (like a closed notebook or a kill)", stop, interrupt_halfway),
                ("2. the same command again: resumes from the bytes on disk, verifies, extracts", user, on_event),
                ("3. once more: everything is in place, nothing is downloaded", user, on_event),
            ):
                fetch(title, step_stop, sink)
                if user.is_set():
                    raise KeyboardInterrupt
        report.bytes_served = origin.bytes_sent
    report.tree = _tree(root / "datasets")
    return report


@contextmanager
def _direct_to(host: str):
    """``host`` in ``no_proxy`` (and ``NO_PROXY``) while the demo runs, as it was afterwards.

    The demo's origin is its own, on loopback: a machine's ``http_proxy`` or ``all_proxy``
    (a dead one, or one that cannot reach this machine's 127.0.0.1) must not stand between
    them. requests and the engine read the proxy from ``os.environ``, so the demo's host is
    named there; the user's other entries are kept.
    """
    before = {key: os.environ.get(key) for key in ("no_proxy", "NO_PROXY")}
    listed = before["no_proxy"] or before["NO_PROXY"] or ""
    entries = [e for e in listed.replace(" ", "").split(",") if e]
    value = ",".join(entries + ([host] if host not in entries else []))
    os.environ["no_proxy"] = os.environ["NO_PROXY"] = value
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def _tree(base: Path) -> list[tuple[str, int]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        rel = Path(dirpath).relative_to(base.parent)
        if Path(dirpath) != base:
            out.append((str(rel) + "/", -1))
        for name in sorted(filenames):
            out.append((str(rel / name), (Path(dirpath) / name).stat().st_size))
    return out


def demo_exit_code(report: DemoReport) -> int:
    """0 when the demo ended with every file in place."""
    return 0 if report.ok else int(ExitCode.FAILURE)
