"""A connect the kernel refuses, again and again, to a host never reached: a route that is off, said in seconds.

A notebook without a route out (a PAI-DSW instance without a public route, Kaggle with its
Internet off, a route abroad whose packets a firewall rejects) fails each connect at once:
``ENETUNREACH`` (no route to that network), ``EHOSTUNREACH`` (a router or firewall says there
is none to the host), ``ECONNREFUSED`` (a reset: nothing listens, or a firewall's REJECT),
``EACCES``/``EPERM`` (this machine's own firewall, a ``prohibit`` route). Asking again in a
second gets the same answer, and ``get`` used to spend its backoff on it (7-8 s: a third of
``--timeout``) before a line that said to run the same command again, which mends nothing. When
such a failure is a connect's, to a host and port that no connection of this process ever
reached (:func:`prefetch.net.open_socket.reached`), :func:`verdict` gives the line:

* refused: after :data:`REFUSED_TRIES` tries (backoff 0.5, 1, 2 s: about 3.5 s), so a server
  restarting as the run begins still has that long to listen again;
* unreachable or prohibited: after :data:`UNREACHABLE_TRIES` tries (about 1.5 s).

Once the host was reached in this process, the same errors are a moment's trouble (a server
restarting, a route flapping) and keep the usual retries (``--retries``, ``--timeout``).
Another source of the same file that answers is used as before (``engine/fetcher.py`` drops
the one that failed while another remains). :func:`advice` is the next step for a machine
whose network is off, which ``net/unresolved.py``'s line ends with too.
"""

from __future__ import annotations

import errno
import os

REFUSED_TRIES = 4  # refused connects to a host never reached before giving up: ~3.5 s of backoff
UNREACHABLE_TRIES = 3  # unreachable or prohibited connects: ~1.5 s

_MEANINGS = {
    errno.ECONNREFUSED: "nothing listens on that port there, or a firewall on the way rejects the connection",
    errno.ENETUNREACH: "this machine has no route to that network: its internet may be off",
    errno.EHOSTUNREACH: "a router or firewall on the way says there is no route to that host",
    errno.ENETDOWN: "this machine's network is down",
    errno.EHOSTDOWN: "that host is down",
    errno.EACCES: "this machine's own firewall or routing forbids that route",
    errno.EPERM: "this machine's own firewall or routing forbids that route",
}
_AT_CONNECT = ("NewConnectionError", "ConnectFailed")  # urllib3's connect failure, a direct connect's


def connect_error(exc: BaseException) -> OSError | None:
    """The connect error under ``exc`` that the kernel gave at once (:data:`_MEANINGS`' errnos),
    or None (a timeout, a failure after the connect, another errno)."""
    from prefetch.net.failures import chain_of

    chain = chain_of(exc)
    if not any(type(e).__name__ in _AT_CONNECT for e in chain) and not isinstance(chain[-1], ConnectionRefusedError):
        return None
    return next((e for e in chain if isinstance(e, OSError) and e.errno in _MEANINGS), None)


def verdict(unreached: list[tuple[str, int, int, str]], tries: int, *, proxy: str | None = None,
            now: bool = False) -> str | None:
    """The line for connects refused at once to hosts never reached, once it is time to stop
    trying; None while a try is still due (or the host was reached: the usual retries apply).

    ``unreached``: (host, port, errno, text) of every source whose connect failed so, the last
    one tried last; ``tries``: the failures in a row of that one; ``proxy``: the proxy (no
    password) whose connect failed, when the connection went through one; ``now``: no more tries
    whatever the error (another file to the host gave up on it already).
    """
    if not unreached:
        return None
    from prefetch.net.open_socket import reached

    host, port, code, text = unreached[-1]
    if reached(host, port):
        return None
    if tries < (REFUSED_TRIES if code == errno.ECONNREFUSED else UNREACHABLE_TRIES) and not now:
        return None
    said = f"{text}; {tries} tries" if tries > 1 else text
    meaning = _MEANINGS.get(code, "the connection was refused at once")
    if proxy:
        return (f"the proxy {proxy}: {said}, and it was never reached: {meaning}; check the *_proxy "
                f"variables (or unset them), and see `prefetch doctor`")
    seen = dict.fromkeys(_host_port(h, p) for h, p, _c, _t in unreached)
    what = _host_port(host, port) if len(seen) == 1 else f"no source could be connected to ({', '.join(seen)})"
    return (f"{what}: {said}, and it was never reached in this run: {meaning}. "
            f"{advice(list(seen), refused=code == errno.ECONNREFUSED)}")


def _host_port(host: str, port: int) -> str:
    """``host:port`` as a URL writes it: an IPv6 address in brackets (``[::1]:9``, not ``::1:9``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def advice(hosts: list[str], *, refused: bool = False) -> str:
    """The next step for a machine whose network is off, or a route that is: ``hosts`` (names,
    ``name:port``) are the sources that failed; a Hugging Face host's mirror is ``HF_ENDPOINT``.
    ``refused``: the host answered with a refusal (a wrong port is likelier than no internet)."""
    names = {(h.rpartition(":")[0] if h.count(":") == 1 or h.startswith("[") else h).strip("[]") for h in hosts}
    endpoint = os.environ.get("HF_ENDPOINT", "").partition("://")[2].partition("/")[0].rpartition("@")[2].lower()
    hub = any(n == "huggingface.co" or n.endswith((".huggingface.co", ".hf.co")) or n == "hf.co"
              or (endpoint and n == endpoint.partition(":")[0]) for n in names)
    mirror = ("a Hugging Face mirror in HF_ENDPOINT (`prefetch mirror use hf-mirror --tool hf`)" if hub
              else "a mirror of the same files (`get --mirror URL`)")
    first = ("Check the URL's port" if refused else
             "Turn the notebook's internet on (Kaggle: the Internet switch in the notebook's settings)")
    return f"{first}, set https_proxy, or use {mirror}; `prefetch doctor` shows what each source answers"
