"""A plain-HTTP body moved from the socket into a file in the kernel (Linux ``splice``).

On a fast link the client's cost is per byte: ``recv`` copies each byte from the
socket into Python's buffer and ``pwrite`` copies it again into the page cache.
``splice`` moves the socket's pages into a pipe without a copy, and from the pipe
into the file with one: half the copies, no Python object per read, the GIL released
throughout. Only where it is the same bytes as a read would give:

* Linux (``os.splice``), a plain TCP socket (never TLS: the socket holds ciphertext),
* a body of known length, not chunked, with nothing left in ``http.client``'s own
  read buffer (:class:`Pipe` users read the start of each body the usual way first),
* a socket with a timeout (urllib3 always sets one): a wait for bytes keeps the read
  timeout, as ``recv`` does.

Everything else reads with ``readinto`` as before.
"""

from __future__ import annotations

import os
import select
import socket

_SPLICE = getattr(os, "splice", None)
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux); the fcntl module names it from Python 3.10 on
_F_GETPIPE_SZ = 1032
_NONBLOCK = getattr(os, "SPLICE_F_NONBLOCK", 2) | getattr(os, "SPLICE_F_MOVE", 1)
_LEAST_PIPE = 64 << 10  # a pipe smaller than this (a user over the kernel's pipe quota) is not worth it
PIPE_SIZE = 1 << 20  # the kernel's default pipe-max-size: at most this much moves per splice


class Pipe:
    """One worker's pipe between a socket and the file; ``size`` bytes move per splice at most.

    ``pending`` bytes sit in it between the two halves of a move; a pipe left holding
    bytes (a move cut short) is replaced before its next use.
    """

    def __init__(self, size: int = PIPE_SIZE) -> None:
        self.r, self.w = os.pipe()
        self.pending = 0
        self.size = 64 << 10
        try:
            import fcntl

            fcntl.fcntl(self.w, _F_SETPIPE_SZ, size)
            self.size = fcntl.fcntl(self.w, _F_GETPIPE_SZ)
        except OSError:
            pass  # pipe-max-size or the user's pipe quota: keep the default

    @classmethod
    def open(cls) -> "Pipe | None":
        """A pipe for splicing, or None where splicing is not available."""
        if _SPLICE is None:
            return None
        try:
            pipe = cls()
        except OSError:
            return None
        if pipe.size < _LEAST_PIPE:
            pipe.close()
            return None
        return pipe

    def clean(self) -> "Pipe":
        """This pipe if it is empty, else a fresh one (the old one's bytes are dropped)."""
        if not self.pending:
            return self
        self.close()
        fresh = Pipe(self.size)
        return fresh

    def close(self) -> None:
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass
        self.r = self.w = -1


def plain_socket(raw) -> socket.socket | None:
    """The plain TCP socket under an ``http.client`` response, or None (TLS, another reader)."""
    import io

    fp = getattr(raw, "fp", None)
    if type(fp) is not io.BufferedReader:
        return None
    sock = getattr(fp.raw, "_sock", None)
    if type(sock) is not socket.socket or sock.gettimeout() is None:
        return None  # an SSLSocket (its bytes are ciphertext), a wrapper, or a blocking socket
    return sock


def splice_in(sock: socket.socket, pipe: Pipe, amount: int) -> int:
    """Move what has arrived on ``sock`` (at most ``amount`` bytes) into ``pipe``; 0 at EOF.

    Waits for bytes up to the socket's timeout, then raises ``socket.timeout``.
    """
    fd = sock.fileno()
    if fd < 0:
        return 0  # closed (an abort)
    amount = min(amount, pipe.size)
    while True:
        try:
            n = _SPLICE(fd, pipe.w, amount, flags=_NONBLOCK)
        except BlockingIOError:
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
            timeout = sock.gettimeout()
            if not poller.poll(None if timeout is None else int(timeout * 1000) + 1):
                raise socket.timeout("timed out") from None
            continue
        pipe.pending += n
        return n


def splice_out(pipe: Pipe, fd: int, n: int, pos: int) -> None:
    """Write the ``n`` bytes waiting in ``pipe`` into ``fd`` at offset ``pos`` (OSError as written)."""
    while n > 0:
        moved = _SPLICE(pipe.r, fd, n, offset_dst=pos)
        if moved <= 0:
            raise OSError(f"splice moved nothing of {n} bytes")
        n -= moved
        pos += moved
        pipe.pending -= moved
