"""A TCP proxy on 127.0.0.1 that makes a loopback server look far away.

``LatencyProxy(upstream_port, rtt=0.2)`` accepts connections on a free port and relays
each to ``127.0.0.1:upstream_port`` with the delays of a route ``rtt`` seconds long:

* the handshake: bytes a client sends in its first ``rtt`` after connecting are held
  until then, as if ``connect()`` had taken the round trip a real SYN / SYN-ACK takes;
* each direction: every byte is delivered ``rtt / 2`` after it arrived, in order.

So a fresh connection's first answer comes two round trips after ``connect()`` and a
request on a kept-alive connection one round trip after it was sent, as on a real
route; bandwidth is whatever the upstream allows (nginx's ``limit_rate`` for a
per-connection limit), or ``pace`` bytes per second per connection towards the client when
given: an exact pace with no burst, which nginx's ``limit_rate`` is not (it grants every
request a second's worth at once, so a client making many short requests outruns it). A
paced connection reads from upstream only as fast as it delivers, so the upstream's count of
bytes served stays what the client really received. With ``max_open``, a connection beyond
that many open at once gets ``503 Service Unavailable`` to its first request and is closed
(``rejected`` counts them): a mirror's cap on connections per client, which nginx's
``limit_conn`` only enforces while a request is being sent, and a paced proxy lets nginx
finish sending long before the client has the bytes. The relay runs in one asyncio loop on a daemon thread; the
bench (bench/run.py) and the tests use it alike. ``connections`` counts accepted
connections and ``peak`` the most open at once; ``accepted`` holds when each was accepted,
``first_answer`` when the first byte from the server reached a client (both
``time.monotonic()``), and ``silent`` counts connections that closed without the client
ever sending a byte (opened ahead and never used). ``requests`` holds (connection number,
request number on it, early) for each request head a served connection relayed: ``early``
when bytes from the server were still on their way to the client on that connection as it
arrived, i.e. the client sent it before it had read the answer before it (pipelining).
"""

from __future__ import annotations

import asyncio
import threading
import time


_PACED_PIECE = 16 << 10  # a paced connection delivers in pieces this size
_PACED_QUEUE = 16  # pieces a paced connection holds: 256 KiB


class LatencyProxy:
    """Relay ``127.0.0.1:port`` -> ``127.0.0.1:upstream_port`` with ``rtt`` seconds of round trip."""

    def __init__(self, upstream_port: int, *, rtt: float, upstream_host: str = "127.0.0.1",
                 pace: float | None = None, max_open: int | None = None) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.rtt = rtt
        self.pace = pace
        self.max_open = max_open
        self.rejected = 0
        self.port = 0
        self.connections = 0
        self.open = 0
        self.peak = 0
        self.accepted: list[float] = []
        self.first_answer: float | None = None
        self.silent = 0
        self.requests: list[tuple[int, int, bool]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, name: str) -> str:
        return f"{self.url}/{name.lstrip('/')}"

    def start(self) -> "LatencyProxy":
        self._thread = threading.Thread(target=self._run, name="latency-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the latency proxy did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        if self._thread is not None:
            self._thread.join(5)

    async def _shutdown(self) -> None:
        self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.get_running_loop().stop()

    def __enter__(self) -> "LatencyProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the relay ---------------------------------------------------------
    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0, backlog=512))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._relay(reader, writer)
        except asyncio.CancelledError:
            writer.close()  # the proxy stops: end quietly

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = time.monotonic()
        self.accepted.append(accepted)
        self.connections += 1
        self.open += 1
        if self.max_open is not None and self.open > self.max_open:
            await self._reject(reader, writer)
            return
        self.peak = max(self.peak, self.open)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self.open -= 1
            return
        spoke = []  # the client sent something
        number, asked, owed = self.connections, [0], [0]  # (owed: bytes from the server not yet delivered)

        def heard(data: bytes) -> None:  # (as it arrives, before its delay)
            for _ in range(data.count(b" HTTP/1.")):  # (a request line: GETs have no body)
                asked[0] += 1
                self.requests.append((number, asked[0], owed[0] > 0))

        established = accepted + self.rtt  # the handshake a real route would take
        half = self.rtt / 2

        def close_both() -> None:  # one side broke: end the other too
            writer.close()
            up_writer.close()

        try:
            await asyncio.gather(
                # the client's end of input ends the connection (an HTTP client does not
                # half-close), so upstream stops sending what nobody will read
                self._pipe(reader, up_writer, half, not_before=established, broken=close_both,
                           on_data=lambda _: spoke.append(True), on_read=heard, last=close_both),
                self._pipe(up_reader, writer, half, not_before=0.0, broken=close_both, pace=self.pace,
                           on_data=self._answered, owed=owed),
                return_exceptions=True,
            )
        finally:
            self.open -= 1
            if not spoke:
                self.silent += 1
            for w in (writer, up_writer):
                w.close()

    def _answered(self, data: bytes) -> None:
        if self.first_answer is None:
            self.first_answer = time.monotonic()

    async def _reject(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the first request with 503 after the route's round trip, then close."""
        self.rejected += 1
        try:
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            await asyncio.sleep(self.rtt)
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (OSError, RuntimeError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                asyncio.TimeoutError):
            pass
        finally:
            self.open -= 1
            writer.close()

    async def _pipe(self, reader, writer, delay: float, *, not_before: float, broken,
                    pace: float | None = None, on_data=None, on_read=None, last=None,
                    owed: list[int] | None = None) -> None:
        """Copy ``reader`` to ``writer``, each piece ``delay`` after it arrived (in order), and
        with ``pace``, no faster than ``pace`` bytes per second: each piece of at most
        ``_PACED_PIECE`` bytes is due once the one before it has had its time; ``on_data(piece)``
        is called as each is delivered, ``on_read(data)`` as it arrives, ``last`` once the end of
        input has been passed on; ``owed[0]`` counts the bytes read and not yet delivered."""
        owed = owed if owed is not None else [0]
        # Paced: a short queue, so upstream is read only about as fast as the pace delivers.
        queue: asyncio.Queue = asyncio.Queue(maxsize=_PACED_QUEUE if pace else 0)
        free_at = 0.0  # paced: when the next piece may leave

        async def deliver() -> None:
            dead = False  # the writer broke: take what comes (a paced reader may wait for room) until the end
            while True:
                due, data = await queue.get()
                if dead and data is not None:
                    owed[0] -= len(data)
                    continue
                wait = due - time.monotonic()
                if wait > 0 and not dead:
                    await asyncio.sleep(wait)
                if data is None:
                    try:
                        writer.write_eof()
                    except (OSError, RuntimeError):
                        pass
                    if last is not None:
                        last()
                    return
                owed[0] -= len(data)  # (before the write: the client cannot answer it sooner)
                if on_data is not None:
                    on_data(data)
                try:
                    writer.write(data)
                    await writer.drain()
                except (OSError, RuntimeError):
                    broken()
                    dead = True

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                try:
                    data = await reader.read(256 << 10)
                except (OSError, RuntimeError):
                    data = b""
                due = max(time.monotonic(), not_before) + delay
                owed[0] += len(data)
                if data and on_read is not None:
                    on_read(data)
                if not pace or not data:
                    await queue.put((max(due, free_at), data or None))
                    if not data:
                        break
                    continue
                for at in range(0, len(data), _PACED_PIECE):
                    piece = data[at:at + _PACED_PIECE]
                    free_at = max(due, free_at)
                    await queue.put((free_at, piece))
                    free_at += len(piece) / pace
            await sender
        finally:
            sender.cancel()
