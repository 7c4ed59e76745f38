"""The sending side of HTTP/1.1 pipelining (``net/pipeline.py`` reads the answers): the next
request written on the connection of an answer still being read, where that is safe.

:func:`send_ahead` writes a GET on a direct answer's connection (never through requests or a
proxy) that proved keep-alive (HTTP/1.1, no ``Connection: close``, no cookie) and whose body has
a known length, not chunked (its reads stop at its last byte, ``net/response.py``), on a host
that never failed a pipelined request; the answer's http.client reader is kept open for the
next answer (``keep``, ``net/read_head.py``). :func:`forget` drops what nobody will ask for;
:func:`misframed` says an answer to a request sent ahead came out of step (``net/pipeline.py``).
"""

from __future__ import annotations

from prefetch.net.pipeline import refuse, refused


def send_ahead(client, resp, url: str, headers: dict[str, str], start: int, end: int | None) -> tuple | None:
    """Write ``GET url`` with ``headers`` (a ``Range`` from ``start``, up to ``end`` exclusive)
    on the connection ``resp`` (``net/response.py``'s, from ``client``) is being read from; the
    request's answer is read by the next ``client.request`` asking exactly the same. Returns the
    connection's (scheme, host, port); None, with nothing sent, where the connection is not one
    to pipeline on (see the module's docstring)."""
    parts = _pipelinable(client, resp)
    if parts is None:
        return None
    conn, raw, pools = parts
    if not client._route(url)[3]:
        return None  # (a proxy, credentials or cookies: requests sends it)
    key, target = pools._parse(url)
    if key != conn.key:
        return None
    from prefetch.net.direct import merged_headers
    from prefetch.net.http import _HEADERS
    from prefetch.net.write_head import request_head

    head = request_head("GET", target, key[1], key[2], key[0], merged_headers(_HEADERS, headers))
    try:
        conn.sock.sendall(head)
    except OSError:
        refuse(key)
        return None
    raw.keep = True  # (its reader stays open when the answer ends: the next answer is read from it)
    conn.reader = raw.fp
    conn.queued = (head, start, end)
    return key


def pipelinable(client, resp) -> bool:
    """``resp`` (from ``client``) is read from a connection a next request may go out on now:
    a direct answer (never requests' or a local file's), HTTP/1.1 kept alive, of known length,
    to a GET without a cookie, on a host that never failed a pipelined request."""
    return _pipelinable(client, resp) is not None


def _pipelinable(client, resp):
    """(connection, http.client answer, pools) of :func:`pipelinable`, else None."""
    from prefetch.net.answer import Answer

    answer = getattr(resp, "_resp", None)
    if type(answer) is not Answer:
        return None  # (through requests: its pool would never read the second answer)
    conn, raw, pools = answer._connection, resp._raw, answer._pool
    if (conn is None or conn.sock is None or conn.queued is not None or refused(conn.key)
            or pools is None or pools is not getattr(client, "_direct", None)):
        return None
    if (raw.version != 11 or raw.will_close or raw.chunked or raw.length is None or raw.fp is None
            or raw._method != "GET" or "set-cookie" in answer.headers):
        return None
    return conn, raw, pools


def forget(client) -> None:
    """Close ``client``'s connections that have a request sent ahead (nobody will ask for it)."""
    pools = getattr(client, "_direct", None)
    if pools is not None:
        pools.drop_ahead()


def misframed(client) -> str:
    """An answer to a request sent ahead on ``client`` began with no answer's head since the
    last call: what came instead (``closed``, ``stalled`` or ``out of step``: bytes that are
    not a head), else "". The answer read before it on that connection may have ended out of
    step (its last bytes may be that head's). Clears the mark."""
    pools = getattr(client, "_direct", None)
    if pools is None or not pools.misframed:
        return ""
    why, pools.misframed = pools.misframed, ""
    return why
