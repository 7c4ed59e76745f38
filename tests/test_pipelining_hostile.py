"""HTTP/1.1 pipelining against hostile servers (issue 20): a request sent ahead whose answer
says ``Connection: close``, comes chunked, claims another version of the file, or follows an
answer with more bytes than its ``Content-Length``. The file is exact (or the change is
detected), never a traceback. The scripted server is ``test_pipelining``'s ``RangeServer``.
"""

from __future__ import annotations

import select
import time

import pytest

from prefetch.errors import PrefetchError
from prefetch.net import pipeline
from prefetch.net.http import Timeouts
from tests.test_pipelining import _RANGE, DATA, RangeServer, download, options

OTHER = bytes(b ^ 0x5A for b in DATA)  # "the file changed": same size, other bytes


class HostileServer(RangeServer):
    """``RangeServer`` whose answers to early requests (sent ahead) misbehave by ``hostile``:
    ``"close"``: ``Connection: close`` on that answer (then the server closes after it);
    ``"chunked"``: that answer's body chunked; ``"changed"``: that answer (and every later one)
    from another version of the file, with ETag "v2" (a server ignoring If-Range);
    ``"extra"``: that answer's body followed by garbage bytes; ``"short"``, ``"stall"``,
    ``"slow"``: see the comment above ``_before``."""

    def __init__(self, data: bytes, hostile: str, **kwargs) -> None:
        self.hostile = hostile
        self.changed = False
        super().__init__(data, **kwargs)

    def _answer(self, head: bytes, early: bool) -> bytes:
        out = super()._answer(head, early)
        if self.hostile == "changed" and (early or self.changed):
            self.changed = True
            head_part, _, body = out.partition(b"\r\n\r\n")
            start = DATA.find(body[:64]) if body else 0
            body = OTHER[start:start + len(body)]
            return head_part.replace(b'ETag: "v1"', b'ETag: "v2"') + b"\r\n\r\n" + body
        if not early:
            return out
        head_part, _, body = out.partition(b"\r\n\r\n")
        if self.hostile == "close":
            return head_part + b"\r\nConnection: close\r\n\r\n" + body
        if self.hostile == "chunked":
            lines = [line for line in head_part.split(b"\r\n") if not line.startswith(b"Content-Length")]
            return (b"\r\n".join(lines) + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        if self.hostile == "extra":
            return out + b"HTTP/1.1 206 garbage\r\n\r\nxyz"
        return out

    # RangeServer's loop, but when a request comes early, ``"short"``: the tail held for the
    # answer before loses its last 5 bytes (that answer is 5 bytes short of its Content-Length,
    # and the next answer follows at once on the connection, which stays open); ``"stall"``: the
    # tail is not sent at all, the early request is answered with its first 100 bytes and the
    # connection then stalls; ``"slow"``: the tail goes out, then the early answer's head a byte
    # at a time, each well within the read timeout (a slow-loris head).
    def _before(self, head: bytes, tail: bytes, early: bool) -> tuple[bytes, bytes]:
        if early and self.hostile == "short":
            return head, tail[:-5]
        if early and self.hostile == "stall":
            return _RANGE.sub(lambda m: b"\r\nRange: bytes=%d-%d" % (int(m.group(1)), int(m.group(1)) + 99), head), b""
        return super()._before(head, tail, early)

    def _send(self, conn, out: bytes, tail: bytes, early: bool) -> bytes | None:
        if early and self.hostile == "stall":
            conn.sendall(out)
            select.select([conn], [], [], 5)  # (the rest of the answer before never comes)
            return None
        if early and self.hostile == "slow":
            conn.sendall(tail)
            for byte in out[len(tail):len(tail) + 200]:
                time.sleep(0.25)
                conn.sendall(bytes([byte]))
            return None
        return super()._send(conn, out, tail, early)


@pytest.mark.parametrize("hostile", ["close", "chunked", "extra", "short", "stall"])
def test_a_pipelined_answer_that_misbehaves_leaves_an_exact_file(tmp_path, hostile):
    """``"short"``: the answer before a request sent ahead is 5 bytes short of its length and
    the next answer follows (its head's first bytes would be read as the file's); ``"stall"``:
    the answer before gets no more of its bytes, the next answer (100 bytes) follows and the
    connection then stalls (the answer before reads all of it as the file's, then times out).
    Either way, what the answer before read after the request went out is fetched again."""
    server = HostileServer(DATA, hostile)
    try:
        download(tmp_path, server.url, options(timeouts=Timeouts(connect=5, read=1.5)))
    finally:
        server.close()
    assert any(early for _, _, early in server.seen)  # (a request did go out ahead)


def test_a_pipelined_answer_from_another_version_restarts_and_never_splices(tmp_path):
    server = HostileServer(DATA, "changed")
    try:
        try:
            result = download(tmp_path, server.url, data=OTHER)
        except PrefetchError:
            result = None
    finally:
        server.close()
    assert any(early for _, _, early in server.seen)
    part = tmp_path / "file.bin.part"
    if part.exists() and result is not None:
        assert part.read_bytes() == OTHER


def test_a_slow_loris_head_on_a_pipelined_answer_meets_the_head_deadline(tmp_path):
    """The answer to a request sent ahead trickles its head a byte at a time, each within the
    read timeout: the whole-head deadline still applies (the host is refused pipelining and
    the request goes again on a fresh connection), and the file is exact."""
    server = HostileServer(DATA, "slow")
    try:
        download(tmp_path, server.url, options(timeouts=Timeouts(connect=5, read=1.5)))
    finally:
        server.close()
    assert any(early for _, _, early in server.seen)
    assert pipeline.refused(server.key)


def test_a_stop_after_a_short_answer_with_a_request_ahead_resumes_exact(tmp_path):
    """The transfer stops as a request sent ahead arrives, after an answer that ran short (the
    next answer's 100 bytes read as the file's, then a stall): the request's head is never read,
    so nothing says the answer before ended in step; what it read after the request went out is
    not kept as done, and the resumed file is exact (three rounds: the stop's timing varies)."""
    import threading

    from prefetch.engine.transfer import download_to_part
    from prefetch.errors import InterruptedTransferError

    opts = options(timeouts=Timeouts(connect=5, read=1.5))
    for round_ in range(3):
        stop = threading.Event()
        server = HostileServer(DATA, "stall", on_early=stop.set)
        folder = tmp_path / str(round_)
        folder.mkdir()
        try:
            with pytest.raises(InterruptedTransferError):
                download_to_part(urls=[server.url], part=folder / "file.bin.part",
                                 state_file=folder / "file.bin.part.json", algorithm="sha256",
                                 options=opts, stop=stop)
            assert any(early for _, _, early in server.seen)
            server.on_early = None
            download(folder, server.url, opts)  # (asserts the file exact)
        finally:
            server.close()


def test_no_state_saved_while_an_answer_may_be_out_of_step_names_another_answers_bytes(tmp_path):
    """The answer before a request sent ahead gets no more of its bytes, the next answer's 100
    bytes follow and the connection stalls (``"stall"``): the answer before reads them as the
    file's and waits out its read timeout. Until that request's own head is read in step, what
    the answer before read after the request went out is not saved as done: every state the
    transfer saves, even one saved during the stall (a kill -9 then would resume from it), names
    only bytes that are the file's. Saves are made every 20 ms to catch one in the stall."""
    import json
    import threading

    part, state_file = tmp_path / "file.bin.part", tmp_path / "file.bin.part.json"
    states, wrong = [], []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                state = json.loads(state_file.read_text())
                held = part.read_bytes()
            except (OSError, ValueError):
                time.sleep(0.005)
                continue
            states.append(state["done"])
            wrong.extend((lo, hi) for lo, hi in state["done"] if held[lo:hi] != DATA[lo:hi])
            time.sleep(0.005)

    server = HostileServer(DATA, "stall")
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        download(tmp_path, server.url, options(timeouts=Timeouts(connect=5, read=1.5), state_interval=0.02))
    finally:
        done.set()
        watcher.join()
        server.close()
    assert any(early for _, _, early in server.seen)  # (a request did go out ahead)
    assert len(states) > 10, len(states)
    assert not wrong, wrong[:3]
