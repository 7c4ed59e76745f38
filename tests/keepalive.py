"""A bare HTTP/1.1 server on 127.0.0.1 that keeps each connection open and answers its
requests in turn with canned bytes: what a test needs to see the exact request heads sent
and to script a connection's answers (tests/test_warm_requests.py, test_single_answer.py)."""

from __future__ import annotations

import socket
import threading


class Listener:
    """A socket on 127.0.0.1 (``port``) whose connections are each served by ``_serve(conn,
    number)`` on a thread of its own, numbered from 1 in the order they came; ``close`` stops it.
    With ``tls_context`` (a server-side ``ssl.SSLContext``) each connection is TLS, its handshake
    done on its own thread."""

    tls_context = None

    def listen(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        number = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            number += 1
            threading.Thread(target=self._serve_tls if self.tls_context else self._serve, args=(conn, number),
                             daemon=True).start()

    def _serve_tls(self, conn: socket.socket, number: int) -> None:
        try:
            conn = self.tls_context.wrap_socket(conn, server_side=True)
        except OSError:
            conn.close()
            return
        self._serve(conn, number)

    def _serve(self, conn: socket.socket, number: int) -> None:
        raise NotImplementedError

    @staticmethod
    def heads(conn: socket.socket):
        """Each request head (without its blank line) a kept-alive connection sends, in turn,
        until the client closes it (or it breaks)."""
        for head, _ in Listener.heads_ahead(conn):
            yield head

    @staticmethod
    def heads_ahead(conn: socket.socket):
        """``(head, ahead)`` for each request head, ``ahead`` when bytes of the next request had
        already arrived as this one was read (it was pipelined)."""
        pending = b""
        while True:
            while b"\r\n\r\n" not in pending:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                pending += chunk
            head, _, pending = pending.partition(b"\r\n\r\n")
            yield head, bool(pending)

    def close(self) -> None:
        self.sock.close()


class KeepAliveServer(Listener):
    """Answers each request on a connection in turn with ``answers[i]`` (the last one again
    after them); ``None`` closes the connection without answering. Records (connection number,
    raw request head)."""

    def __init__(self, answers: list[bytes | None]) -> None:
        self.answers = answers
        self.seen: list[tuple[int, bytes]] = []
        self.served = 0
        self.listen()
        self.base = f"http://127.0.0.1:{self.port}"

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            for head in self.heads(conn):
                self.seen.append((number, head + b"\r\n\r\n"))
                answer = self.answers[min(self.served, len(self.answers) - 1)]
                self.served += 1
                if answer is None:
                    return
                conn.sendall(answer)

