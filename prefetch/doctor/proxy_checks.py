"""``prefetch doctor``'s proxy checks: each proxy variable as ``get`` will read it (password
hidden), and whether its proxy takes a connection and speaks what its scheme says (an
``https://`` variable for a plain-HTTP proxy is the usual slip)."""

from __future__ import annotations

from typing import Mapping

from prefetch.doctor.report import Check, Level


def check_proxies(env: Mapping[str, str], checks: list[Check], *, deadline: float) -> None:
    """Each proxy variable (password hidden), and whether its proxy accepts a connection."""
    import socket
    from urllib.parse import urlsplit

    from prefetch.net.proxies import shown_proxy

    seen: dict[tuple[str, int], tuple[str, str]] = {}  # (host, port) -> (variable, scheme)
    # Both schemes' own variables set: get (requests, and its direct path) never reads all_proxy.
    overridden = all(env.get(v) or env.get(v.upper()) for v in ("http_proxy", "https_proxy"))
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        value = env.get(name, "").strip()
        if not value:
            continue
        unused = name.lower() == "all_proxy" and overridden
        checks.append(Check("proxy", Level.INFO, f"{name}={shown_proxy(value)}" + (
            " (overridden: http_proxy and https_proxy are both set, so get never uses it; not tested)" if unused else "")))
        try:
            parts = urlsplit(value if "://" in value else "http://" + value)
            address = (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
        except ValueError:
            checks.append(Check("proxy", Level.FAIL, f"{name} is not a valid proxy URL", "fix it or unset it"))
            continue
        if any(c.isspace() or ord(c) < 32 for c in address[0]):  # (get refuses it: flow.planning.check_proxy_env)
            checks.append(Check("proxy", Level.FAIL, f"{name} is not a valid proxy URL (a space or control "
                                f"character in its host {address[0]!r})", "fix it or unset it"))
            continue
        if unused:  # (still a valid URL above: get refuses a malformed one, used or not)
            continue
        if parts.scheme.lower() not in ("http", "https"):
            checks.append(Check("proxy", Level.FAIL, f"{name} names a {parts.scheme}:// proxy, which get does not "
                                "support (it refuses to start)", "set http_proxy and https_proxy to the proxy's "
                                "http:// address (local proxy clients serve one too), or unset it"))
            continue
        seen.setdefault(address, (name, parts.scheme.lower()))
    no_proxy = env.get("no_proxy") or env.get("NO_PROXY")
    if seen and no_proxy:
        checks.append(Check("proxy", Level.INFO, f"no_proxy={no_proxy} (these hosts are reached directly)"))
    for (host, port), (name, scheme) in seen.items():
        try:
            sock = socket.create_connection((host, port), timeout=deadline)
        except OSError as exc:
            checks.append(Check("proxy", Level.FAIL,
                                f"the proxy {host}:{port} ({name}) does not accept connections: {exc.strerror or exc}",
                                "every download through it will fail: start the proxy, fix the variable, or unset "
                                "it (or list hosts to reach directly in no_proxy)"))
        else:
            plain = _speaks_plain_http(sock, host, port, env) if scheme == "https" else False
            sock.close()
            if plain is None:  # (get fails on it at once too: net.proxies.handshake_timed_out)
                checks.append(Check("proxy", Level.FAIL, f"the proxy {host}:{port} ({name}) took the connection but "
                                    "did not answer the TLS handshake, nor a plain HTTP request: it is hung or not "
                                    "a proxy", "check it, or unset the proxy variable"))
            elif plain:
                checks.append(Check("proxy", Level.FAIL, f"the proxy {host}:{port} ({name}) answers in plain HTTP, "
                                    "where the variable's https:// asks for TLS",
                                    f"write it as http://{host}:{port} in {name}"))
            else:
                checks.append(Check("proxy", Level.OK, f"the proxy {host}:{port} ({name}) accepts connections"))


def _speaks_plain_http(sock, host: str, port: int, env: Mapping[str, str]) -> bool | None:
    """A TLS handshake on ``sock`` is answered in plain HTTP (an https:// variable for an http proxy).
    The context is ``get``'s own (``reach_host.tls_context``); a plain answer fails before any certificate.
    A handshake left unanswered (tinyproxy waits for the end of a request line) is followed by a
    plain request to the proxy itself, as ``get`` does (``net.proxies.speaks_plain_http``); None
    when that goes unanswered too (hung, or no proxy: ``get`` fails on it)."""
    import ssl

    from prefetch.doctor.reach_host import tls_context
    from prefetch.net.failures import spoke_plain_http
    from prefetch.net.proxies import speaks_plain_http

    try:
        tls_context(env).wrap_socket(sock, server_hostname=host or None).close()
    except ssl.SSLError as exc:
        return spoke_plain_http(str(exc))
    except TimeoutError:
        return speaks_plain_http(f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}") or None
    except OSError:
        pass
    return False
