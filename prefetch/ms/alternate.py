"""ModelScope as a second source for a Hugging Face repo's LFS files (``get hf://... --lfs-from ms://...``).

Many models are published on both hubs with the same weights: the same bytes, so the
same sha256. From a notebook in China the ModelScope copy is often the fast one, the
Hugging Face route the slow one. With ``--lfs-from ms://OWNER/NAME`` the ModelScope repo
is listed once, and every LFS file of the Hugging Face selection whose sha256 and size
the ModelScope listing also names gets the ModelScope URL as one more source. The
engine then takes pieces from both. Nothing is trusted on ModelScope's word: the blob is
checked against the sha256 *the Hugging Face Hub* lists, and ``hf/download.py`` fetches
it again from the Hub alone when a mixed download does not match. The repo still lands
in the Hugging Face cache only; ModelScope's cache is not touched.

A ModelScope repo that cannot be listed (unreachable, refused, malformed) costs a note,
never the download. The Hugging Face token is never sent to ModelScope (the Hub's client
sends it to the Hub's origin only); the ModelScope token is used for the listing only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from prefetch.errors import NetworkError, UsageError
from prefetch.model.events import Event, EventKind, EventSink
from prefetch.ms import api
from prefetch.ms.names import is_ms_name, ms_endpoint, ms_token, parse_ms_name


class LfsCopies:
    """``copies(files, on_event)`` -> {sha256: (ModelScope URL,)} for the LFS files ModelScope also holds."""

    def __init__(self, name: str, *, env: Mapping[str, str], config: Path | None) -> None:
        if not is_ms_name(name):
            raise UsageError(f"--lfs-from takes a ModelScope repo, ms://OWNER/NAME[@REV]; got {name!r}")
        self.repo = parse_ms_name(name)
        self.endpoint = ms_endpoint(None, env=env, config=config)
        self.token = ms_token(env)
        self.label = self.repo.label
        from prefetch.hf.api import max_listed_files

        self.max_files = max_listed_files(env)  # PREFETCH_HUB_MAX_FILES, as the repo's own listing

    def __call__(self, files: Sequence, on_event: EventSink, *, label: str, timeouts=None) -> dict[str, tuple[str, ...]]:
        """``files``: the Hub's selection (``HubFile``); ``label`` names the repo in the notes."""
        wanted = {(f.sha256, f.size) for f in files if getattr(f, "sha256", None)}
        if not wanted:
            return {}
        client = api.client_factory(self.endpoint, self.token)(timeouts=timeouts)
        try:
            listed = api.list_files(client, self.endpoint, self.repo, token=bool(self.token),
                                    max_files=self.max_files)
        except NetworkError as exc:
            on_event(Event(EventKind.NOTE, label, message=f"--lfs-from {self.label} not used: {exc}"))
            return {}
        finally:
            client.close()
        copies: dict[str, tuple[str, ...]] = {}
        for f in listed:
            if f.sha256 and (f.sha256, f.size) in wanted and f.sha256 not in copies:
                copies[f.sha256] = (api.file_url(self.endpoint, self.repo, f.path),)
        on_event(Event(EventKind.NOTE, label, message=f"--lfs-from {self.label}: {len(copies)} of {len(wanted)} "
                                                      "LFS file(s) also come from there, checked by the Hub's sha256"))
        return copies
