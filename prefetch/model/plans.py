"""What the flow passes between its stages: where a file goes, and how it ended.

``FilePlan`` says where one file goes (final path, other names, extraction dirs);
``FileResult`` is what fetching it did; ``VerifyResult`` is a re-check of a cached file.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Sequence

from prefetch.errors import ExitCode
from prefetch.model.lean import dataclass
from prefetch.model.specs import FileSpec


@dataclass(frozen=True)
class FilePlan:
    """Where one file of a dataset goes."""

    dataset: str
    spec: FileSpec
    final: Path  # the primary path
    also: tuple[Path, ...]  # the same bytes under more names
    extract_into: tuple[Path, ...]  # directories to extract the archive into
    explicit_url: bool = False  # a URL the user typed (not a registry dataset)
    # gzip files decompressed beside the archive (torchvision's MNIST family: ``x.gz`` -> ``x``)
    decompress_to: tuple[Path, ...] = ()
    # the same bytes in another cache (Keras's copy of a torchvision file): when one is
    # there and matches the expected hash, it is hard-linked (or copied) instead of downloaded
    copies: tuple[Path, ...] = ()
    # what the reader does to the extracted tree (torchvision's classes): paths moved
    # (from, to), a folder of .gz files decompressed to the top, and directories merged
    # into the ones already there (as tar does) instead of replaced whole
    extract_moves: tuple[tuple[str, str], ...] = ()
    extract_gunzip: str | None = None
    extract_merge: bool = False
    # a folder of the extracted tree whose contents alone are placed ("" = the whole tree)
    extract_subfolder: str = ""
    # the one top-level folder the archive may hold, and the most bytes it may expand to
    # (an NLTK package: its own ``<id>/`` folder and its index's unzipped size, as nltk checks)
    extract_top: str = ""
    extract_max_bytes: int | None = None
    # no group or world write bit on the folders created and the tree extracted, whatever the umask:
    # nltk 3.10 refuses to read data another account could write (its downloader installs so too)
    private: bool = False
    # "<keras dataset>/<file name>": another cache's file with the same bytes; where this one
    # lands is noted (cache/copies.py) so that cache links it instead of downloading it
    shares: str | None = None
    # a URL the user named no file for, with --content-disposition: the server's name for it
    # replaces the URL's before the download starts (flow/served_names.py)
    served_name: bool = False
    # a plain URL download (-o, -P, -i): the file at ``final`` is this URL's only when prefetch's
    # record of it names this link (net/urls.link_key); one placed from another link is replaced
    by_link: bool = False
    # the source's version of a file it lists without a hash (a ModelScope listing's per-file
    # ``Revision``): a file at ``final`` placed at another version, or whose record names none, is stale
    version: str | None = None

    @property
    def label(self) -> str:
        return self.spec.name

    @property
    def paths(self) -> list[Path]:
        return [self.final, *self.also]


@dataclass
class FileResult:
    """The outcome for one file (``error`` set when it failed)."""

    dataset: str
    name: str
    path: str
    paths: list[str]
    extracted: list[str] = field(default_factory=list)  # extracted top-level folders/files
    status: str = "pending"  # downloaded | cached | failed | interrupted
    size: int = 0
    downloaded: int = 0
    reused: int = 0
    elapsed: float = 0.0
    algorithm: str | None = None
    digest: str | None = None
    verified: bool = False  # matched an expected hash
    sources_dropped: list[str] = field(default_factory=list)
    source: str | None = None  # the URL that delivered (most of) the bytes this run
    sources: dict[str, int] = field(default_factory=dict)  # URL -> bytes it delivered this run
    error: str | None = None
    exit_code: int = 0


def overall_exit_code(results: Sequence[FileResult]) -> int:
    """0, or the first real failure's exit code.

    A file that was merely stopped because of another's failure (``--fail-fast``:
    exit 7) counts only when nothing else failed, so the cause is what is reported.
    """
    codes = [r.exit_code or int(ExitCode.FAILURE) for r in results if r.status in ("failed", "interrupted")]
    real = [c for c in codes if c != int(ExitCode.INTERRUPTED)]
    if real:
        return real[0]
    return codes[0] if codes else 0


@dataclass
class VerifyResult:
    """The re-check of one file."""

    path: str
    state: str  # ok | mismatch | missing | unchecked (no known hash)
    algorithm: str | None
    expected: str | None
    got: str | None
