"""A direct answer (``net/direct.py``) as :class:`prefetch.net.response.Response` reads it.

What ``Response`` (and requests' cookie jar) read of urllib3's ``HTTPResponse``, whose place
:class:`Answer` takes on the direct path: http.client's response (``_fp``), its status, its
headers (:class:`Head`: case-insensitive, repeated ones joined as urllib3 joins them), and the
connection to give back to its pool. As urllib3's response, it refuses a ``Content-Length``
with conflicting values (:class:`InvalidHeader`).
"""

from __future__ import annotations


class InvalidHeader(ValueError):
    """An answer's header that cannot be used (urllib3's words; ``net/send_errors.py`` reads the name)."""


class Answer:
    """http.client's response ``fp`` read on ``conn``, which goes back to ``pool`` once released."""

    __slots__ = ("_fp", "_original_response", "status", "headers", "_connection", "_pool")

    def __init__(self, fp, conn, pool) -> None:
        self._fp = self._original_response = fp
        self.status = fp.status
        self.headers = Head(fp.msg)
        self._connection = conn
        self._pool = pool
        length = self.headers.get("content-length")
        if length is not None and "," in length and not fp.chunked:
            try:
                lengths = {int(value) for value in length.split(",")}
            except ValueError:
                lengths = set()
            if len(lengths) > 1:  # (urllib3's response refuses it so)
                fp.close()
                raise InvalidHeader(f"Content-Length contained multiple unmatching values ({length})")

    def release_conn(self) -> None:
        if self._pool is not None and self._connection is not None:
            self._pool.put(self._connection)
            self._connection = None

    def close(self) -> None:
        if not self._fp.isclosed():
            self._fp.close()
        if self._connection is not None:
            self._connection.close()


def _compat32():
    # email.policy's compat32 is this one; importing email.policy itself would load the header
    # registry (~7 ms of a process), which http.client's parser has not loaded.
    from email._policybase import compat32

    return compat32


def _unfold(value: str) -> str:
    """A folded header value on one line: each line break with the blanks around it one space.

    The blanks before a break are matched only from the start of their run (urllib3 2.8's
    pattern): ``[ \t]*\r\n`` tried at every blank of a long run that no break ends went back
    over the whole run each time, quadratic: a hostile server's head of 100 such lines of 64 KiB
    (http.client's limits) held the process, and the GIL, for minutes."""
    import re

    return re.sub(r"(?:(?<![ \t])[ \t]+)?\r?\n[ \t]+", " ", value)


def unfold_headers(headers):
    """``headers`` (urllib3's ``HTTPHeaderDict`` of an answer through requests) with each folded value
    on one line, as :class:`Head` reads a direct answer's: urllib3 before 2.8 keeps a fold's line
    break, so an ETag a server folded would differ by path, and go back out in ``If-Range`` with a
    line break in it (which ``http.client`` refuses to send). The same object when nothing is folded."""
    if not any("\n" in value for value in headers.values()):
        return headers
    unfolded = type(headers)()
    for name, value in headers.items():
        unfolded.add(name, _unfold(value) if "\n" in value else value)
    return unfolded


class Head:
    """An answer's headers as urllib3's ``HTTPHeaderDict`` presents them: names without case,
    a repeated header's values joined with ", ", a folded value on one line (as urllib3 2.8
    does, and as RFC 9112 asks of a user agent; 2.7 kept the line break)."""

    __slots__ = ("_items", "_values")

    def __init__(self, message) -> None:
        # The lines as read: what compat32's items() returns for a head http.client decoded
        # as Latin-1 (no surrogates), without a policy call per header.
        raw = getattr(message, "_headers", None)
        self._items = list(raw) if raw is not None and message.policy is _compat32() else message.items()
        for at, (name, value) in enumerate(self._items):
            if "\n" in value:  # a folded line (obs-fold), rare: one space for the fold (RFC 9112 5.2, urllib3 >= 2.8)
                self._items[at] = (name, _unfold(value))
        values: dict[str, str] = {}
        for name, value in self._items:
            key = name.lower()
            values[key] = f"{values[key]}, {value}" if key in values else value
        self._values = values

    def get(self, name: str, default=None):
        return self._values.get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def _grouped(self) -> dict[str, list]:
        groups: dict[str, list] = {}
        for name, value in self._items:
            groups.setdefault(name.lower(), [name]).append(value)
        return groups

    def items(self):
        """Every header line, a name's lines together in the order names first came (urllib3's)."""
        return [(group[0], value) for group in self._grouped().values() for value in group[1:]]

    def keys(self):
        """Each name once, as first received."""
        return [group[0] for group in self._grouped().values()]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._values)
