"""How a ``get`` fetches: sources, transfer knobs, locking, parallel files."""

from __future__ import annotations

from dataclasses import field

from prefetch.engine.options import TransferOptions
from prefetch.model.lean import dataclass


@dataclass(frozen=True)
class FetchOptions:
    """How to fetch: sources, transfer knobs, locking."""

    transfer: TransferOptions = field(default_factory=TransferOptions)
    mirrors: tuple[str, ...] = ()  # flat dataset mirror base URLs
    use_origin: bool = True  # also (or only) the registry's origin URL
    lock_timeout: float = 6 * 3600.0
    max_parallel_files: int | None = None  # None: as many as a host has connections (host_connections)
    fail_fast: bool = False
    job: str | None = None
    url_mirrors: bool = False  # mirrors apply to plain URL downloads too (only when --mirror was given)
    sources: object | None = None  # prefetch.store.seed.StoreSources: s3:// sources and seeding
    force: bool = False  # download again even when a good file is in place
    # factory(timeouts=...) -> net.http.Client: a hub's client that keeps its token on its own origin
    client_factory: object | None = None
    # url -> (engine.hosts.Host, engine.single.Handover): a --content-disposition name probe's
    # answer, which was the download's first request; that file's download reads on from it
    # (flow/served_names.py, engine/transfer.py). Whatever is left unused is given back (give_back).
    handed: dict | None = None
