"""The proxy a job was started through, kept for ``resume`` (AutoDL's ``source
/etc/network_turbo`` sets it for one cell's shell only).

``get -b`` stores the proxy variables of the cell that started it in the request (each
``user:password@`` shown as ``***@``: no credential in the record). ``resume`` from a shell
that sets no proxy variable (a new kernel, another cell) uses them again; one that had a
password cannot be (it is not stored), so that resume is refused with one line saying to set
the variable again. A shell that sets any proxy variable resumes with its own, which becomes
the job's from then on (stored in its place: a later resume from a shell that sets none uses
the latest proxy the user gave, not the first cell's, which may be gone), and one with
``no_proxy='*'`` with none (for that run: the stored proxy stays).
"""

from __future__ import annotations

from typing import Mapping

PROXIES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
KEPT = PROXIES + ("no_proxy", "NO_PROXY")


def pin_proxies(env: Mapping[str, str]) -> list[str]:
    """``VAR=value`` for each proxy variable set in ``env``, credentials hidden."""
    if not any(env.get(name) for name in PROXIES):
        return []
    from prefetch.net.proxies import shown_proxy

    return [f"{name}={shown_proxy(env[name])}" for name in KEPT if env.get(name)]


def resume_environment(job_id: str, stored: list[str], env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a resumed worker: the job's stored proxy variables when ``env`` sets none.

    Raises:
        UsageError: a stored proxy had credentials (never stored) and ``env`` sets no proxy.
    """
    out = dict(env)
    if not stored or any(env.get(name) for name in PROXIES) or "*" in (env.get("no_proxy"), env.get("NO_PROXY")):
        return out  # (no_proxy='*': this shell asks for no proxy at all)
    pairs = [entry.partition("=")[::2] for entry in stored if "=" in entry]
    hidden = [f"{name}={value}" for name, value in pairs if name in PROXIES and "***@" in value]
    if hidden:
        from prefetch.errors import UsageError

        name = hidden[0].partition("=")[0]
        raise UsageError(f"job {job_id} was started through the proxy {hidden[0]}, whose password is never stored: "
                         f"set {name} again in this shell and resume (`export {name}=...; prefetch resume {job_id}`)")
    for name, value in pairs:
        if name in KEPT and not env.get(name):
            out[name] = value
    return out
