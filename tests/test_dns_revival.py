"""A source dropped because its name did not resolve is tried again later in a long run (issue 21, item 6).

The mirror is reached by a host name, ``localhost``. At first the name fails to resolve: the
engine's resolve table (``PREFETCH_RESOLVE``'s, ``localhost=fail``) raises urllib3's own
``NameResolutionError`` for it where the connection is made, the same exception a failed
``getaddrinfo`` raises, so the failure is classified and the source dropped by the real code
path. Once the drop is logged, the test takes the name out of the table: from then on the name
goes to the system's real resolver, which resolves it to the loopback address the mirror
listens on, as a DNS outage that ends would. (A test-controlled DNS server would need the
machine's resolver configuration changed; this mirrors the refused-port test in
``test_left_open.py`` instead, which opens the port once the source is dropped.)
"""

from __future__ import annotations

import random
import threading

from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from prefetch.model.events import Event
from tests.origin import CloseAfter, OriginServer

DATA = random.Random(64).randbytes(2 << 20)


def test_a_source_dropped_because_its_name_did_not_resolve_is_tried_again(home, origin, tmp_path):
    origin.put("big.bin", DATA)
    origin.rate = 200_000  # a long run: the origin is slow ...
    for _ in range(2):  # ... and its first connections break after a while: new requests follow
        origin.add_fault(CloseAfter(300_000, path="big.bin"))
    resolve: dict[str, str | None] = {"localhost": None}  # the name does not resolve (yet)
    dropped = threading.Event()
    notes: list[str] = []

    def on_event(event: Event) -> None:
        message = event.message or ""
        notes.append(message)
        if message.startswith("dropped source http://localhost:") and not dropped.is_set():
            dropped.set()
            resolve.pop("localhost")  # the outage ends: the system resolver answers from now on

    with OriginServer() as mirror:
        mirror.put("big.bin", DATA)
        mirror_url = f"http://localhost:{mirror.port}/big.bin"
        options = TransferOptions.from_env(
            {}, revive_after=0.5, min_split=65536, connections=2, backoff_base=0.02, backoff_cap=0.1,
            connect_timeout=1.0, read_timeout=2.0, resolve=resolve)
        result = download_to_part(urls=[origin.url_for("big.bin"), mirror_url], part=tmp_path / "big.bin.part",
                                  state_file=tmp_path / "big.bin.part.json", algorithm="sha256", options=options,
                                  on_event=on_event)

        assert dropped.is_set(), notes
        drop = next(n for n in notes if n.startswith("dropped source http://localhost:"))
        assert "resolve" in drop.lower() or "name or service not known" in drop.lower(), drop  # named a DNS failure
        assert (tmp_path / "big.bin.part").read_bytes() == DATA and result.size == len(DATA)
        assert mirror.data_requests("big.bin"), notes  # the dropped source was tried again, and delivered
