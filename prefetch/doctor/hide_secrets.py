"""The doctor report without the passwords of the URLs it was configured with.

A proxy variable, pip's ``index-url``, ``HF_ENDPOINT`` or a mirror may carry ``user:password@``;
the report quotes them (and its probes' errors quote them again). Every password found in those
settings is replaced by ``***`` wherever it stands as a credential (``net.proxies.credential_patterns``):
``:PASSWORD@``, percent-decoded or as requests quotes it, and a piece of it a parser's error
quotes (cut at a ``/`` or a backslash, in quotes), so the report holds none, whatever prints it
(``doctor --json`` as the text output; a password with a quote in it, which the printers' pattern
stops at, included). The same letters elsewhere (a password ``data``, a path ``/data/x``) stay.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Iterable, Mapping


def passwords_in(values: Iterable[str | None]) -> list:
    """Where the passwords of the URLs among ``values`` (a proxy written without its scheme too)
    may stand in a message, as ``net.proxies.credential_patterns``, longest passwords first."""
    from prefetch.net.proxies import credential_patterns

    found: dict[str, list] = {}
    for value in values:
        if not value or "@" not in value:
            continue
        for word in value.split():
            if "@" in word and word not in found:
                found[word] = credential_patterns(word)
    return [p for word in sorted(found, key=len, reverse=True) for p in found[word]]


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


def hide(report, patterns: list):
    """``report`` (a ``DoctorReport``) with each password (``passwords_in``) as ``***``."""
    if not patterns:
        return report
    from prefetch.net.proxies import hide_credentials

    def clean(item):
        changes = {}
        for f in fields(item):
            value = getattr(item, f.name)
            if isinstance(value, str):
                new = hide_credentials(value, patterns)
                if new != value:
                    changes[f.name] = new
        return replace(item, **changes) if changes else item

    return replace(report, checks=tuple(clean(c) for c in report.checks),
                   sources=tuple(clean(s) for s in report.sources))
