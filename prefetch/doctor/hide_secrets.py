"""The doctor report without the passwords of the URLs it was configured with.

A proxy variable, pip's ``index-url``, ``HF_ENDPOINT`` or a mirror may carry ``user:password@``;
the report quotes them (and its probes' errors quote them again). Every password found in those
settings is replaced by ``***`` wherever it stands as ``:PASSWORD@`` in a check or a source's
verdict (and, three characters or more, wherever it stands: a parser's error may quote it
cut at a ``/`` or a backslash), so the report holds none, whatever prints it (``doctor --json`` as the text output; a
password with a quote in it, which the printers' pattern stops at, included).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Iterable, Mapping
from urllib.parse import unquote, urlsplit


def passwords_in(values: Iterable[str | None]) -> set[str]:
    """The passwords of the URLs among ``values`` (a proxy written without its scheme too), and
    the pieces of a password a parser may quote (``net.proxies.secret_pieces``: a password with
    a ``/`` in it, which ends the host for urlsplit, included)."""
    from prefetch.net.proxies import secret_pieces

    found: set[str] = set()
    for value in values:
        if not value or "@" not in value:
            continue
        for word in value.split():
            found.update(secret_pieces(word))
            try:
                password = urlsplit(word if "://" in word else "http://" + word).password
            except ValueError:
                continue
            if password:
                found.update({password, unquote(password)})
    return found


def settings(env: Mapping[str, str], effective, catalog) -> list[str | None]:
    """Every configured value that may be a URL with a password."""
    values: list[str | None] = [v for v in env.values() if "@" in v]
    values += [t.url for t in effective.tools]
    pip = getattr(effective, "pip", None)
    if pip is not None:
        values += [pip.index_url, *pip.extra_index_urls]
    if catalog is not None:
        values += [getattr(m, "url", None) for m in catalog.datasets.values()]
        keys = ("pypi", "conda", "hf", "ms", "probe")
        values += [getattr(m, key, None) for m in catalog.mirrors.values() for key in keys]
    return values


def hide(report, passwords: set[str]):
    """``report`` (a ``DoctorReport``) with each ``:PASSWORD@`` as ``:***@``."""
    if not passwords:
        return report
    ordered = sorted(passwords, key=len, reverse=True)

    def clean(item):
        changes = {}
        for f in fields(item):
            value = getattr(item, f.name)
            if isinstance(value, str):
                new = value
                for password in ordered:
                    new = new.replace(f":{password}@", ":***@")
                for password in ordered:  # (quoted without its "@": a parser's words, "'alice:Zq7' is not a valid host")
                    if len(password) >= 3:
                        new = new.replace(password, "***")
                if new != value:
                    changes[f.name] = new
        return replace(item, **changes) if changes else item

    return replace(report, checks=tuple(clean(c) for c in report.checks),
                   sources=tuple(clean(s) for s in report.sources))
