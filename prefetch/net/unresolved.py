"""A name that does not resolve while nothing was reached: a machine without internet, said at once.

A hosted notebook with its internet off (Kaggle's "Internet" setting, a PAI or campus machine
without a public route) fails every lookup: ``[Errno -3] Temporary failure in name
resolution`` (``EAI_AGAIN``) or ``[Errno -2] Name or service not known`` (``EAI_NONAME``).
Retries do not mend that, and ``get`` used to spend its backoff (7-9 s) on it before one
line that did not say why. When a failure is a lookup's and no connection of this process has
ever been made (:func:`prefetch.net.open_socket.connected_once`), :func:`verdict` gives the line:

* ``EAI_NONAME``: at the first failure. The resolver had an answer ("no such name"): asking
  it again in a second gets the same one; a wrong name and a resolver with no upstream say
  it alike.
* ``EAI_AGAIN`` (and any other lookup error): after :data:`AGAIN_TRIES` tries (the backoff
  between them is 0.5 s then 1 s: about 1.5 s). It can be a moment's trouble (a container's
  resolver still starting, a UDP answer lost), which one or two tries mend; the C library
  already asked its servers ``attempts`` times within each of those.

Once anything connected, a lookup that fails is a moment's trouble of a network that works
and keeps the usual retries (``--retries``, ``--timeout``). The line ends with the next step
for a machine whose network is off (:func:`prefetch.net.unreachable.advice`: the notebook's
internet switch, a proxy, a mirror, ``prefetch doctor``), not "run the same command again".
"""

from __future__ import annotations

AGAIN_TRIES = 3  # lookups that failed with EAI_AGAIN (nothing reached) before giving up: ~1.5 s of backoff
HINT = "this machine may have no internet access"


def lookup_error(exc: BaseException):
    """The failed lookup under ``exc`` (requests', urllib3's and the socket's wrappers), a
    ``socket.gaierror``, or None."""
    import socket

    from prefetch.net.failures import chain_of

    return next((e for e in chain_of(exc) if isinstance(e, socket.gaierror)), None)


def verdict(unresolved: list[tuple[str, int, str]], tries: int, *, proxy: str | None = None,
            now: bool = False) -> str | None:
    """The line for lookups that failed while nothing was reached, once it is time to stop trying;
    None while a try is still due (or something was reached: the usual retries apply).

    ``unresolved``: (host, gaierror errno, its text) of every source that did not resolve, the
    last one tried last; ``tries``: the failures in a row of that one; ``proxy``: the proxy
    (no password) whose own name failed, when the connection went through one; ``now``: no
    more tries whatever the error (another file to the host gave up on it already).
    """
    if not unresolved:
        return None
    import socket

    from prefetch.net.open_socket import connected_once
    from prefetch.net.unreachable import advice

    if connected_once():
        return None
    host, code, text = unresolved[-1]
    if code != socket.EAI_NONAME and tries < AGAIN_TRIES and not now:
        return None
    said = f"{text}; {tries} tries" if tries > 1 else text
    if proxy:
        return (f"the proxy {proxy}: name lookup failed ({said}) and nothing was reached: check the "
                f"*_proxy variables, or {HINT}; see `prefetch doctor`")
    names = list(dict.fromkeys(h for h, _c, _t in unresolved))
    what = f"{host}: name lookup failed" if len(names) == 1 else \
        f"name lookup failed for {', '.join(names[:-1])} and {names[-1]}"
    return f"{what} ({said}) and nothing was reached: {HINT}, or the name is wrong. {advice(names)}"
