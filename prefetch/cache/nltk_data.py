"""NLTK data as ``nltk.download`` leaves it: the data dir, the index, and where each package goes.

nltk (``data.py``, ``downloader.py``, 3.10) reads:

* the data dir: ``nltk.download`` installs into the first entry of ``nltk.data.path`` that
  exists and is writable, else ``~/nltk_data``; ``nltk.data.path`` is the ``NLTK_DATA``
  entries (``os.pathsep``-separated), ``~/nltk_data``, then ``sys.prefix``'s
  ``nltk_data``, ``share/nltk_data``, ``lib/nltk_data`` and four system paths. prefetch
  computes the same list without importing nltk; a ``NLTK_DATA`` entry is used even when
  it does not exist yet (it is created), since ``nltk.data.find`` searches it first;
* the index, ``index.xml`` (the ``gh-pages`` branch of nltk_data): ``<package id subdir
  size unzipped_size checksum(md5) unzip url>`` and ``<collection id><item ref/>``;
* a package: ``<data dir>/<subdir>/<id>.zip``, unzipped beside it into ``<subdir>/<id>/``
  when ``unzip="1"``; ``nltk.download`` judges it installed when the zip has the index's
  size and md5 and the unzipped files add up to ``unzipped_size``.

A mirror has the gh-pages layout: ``BASE/index.xml`` and ``BASE/packages/<subdir>/<id>.zip``
(packages are fetched from there, whatever the ``url`` attributes of a mirrored index say).
BASE is an http(s) URL, a team store (``s3://BUCKET/PREFIX``) or a local folder (an
exported copy on a NAS mount). Without a mirror the built-in snapshot (``nltk_index.json``,
generated from a real ``index.xml``; its commit and date are inside) answers, so
raw.githubusercontent.com is needed only for ids the snapshot lacks.

The index's checksum is md5 (``checksum``); indexes built since October 2025 also carry
``sha256_checksum``, which nltk 3.10 prefers, and so does prefetch when it is there.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Mapping, Sequence

from prefetch.errors import NetworkError, UsageError
from prefetch.model.specs import NLTK_SCHEME, named_by

SCHEME = NLTK_SCHEME
ORIGIN = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages"
_ID = re.compile(r"^[A-Za-z0-9][\w.+-]{0,99}$")
_SUBDIR = re.compile(r"^[A-Za-z0-9_][\w.-]{0,99}(/[A-Za-z0-9_][\w.-]{0,99})*$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SYSTEM_PATHS = ("/usr/share/nltk_data", "/usr/local/share/nltk_data", "/usr/lib/nltk_data",
                 "/usr/local/lib/nltk_data")


# Retired pickle packages and their successors (CVE-2024-39705): nltk's downloader (3.10.4)
# installs the successor too when it reaches the old one, directly or through a collection
# such as ``popular``, if its index has the successor (``_SUCCESSORS``, nltk #3394).
SUCCESSORS = {
    "punkt": "punkt_tab",
    "averaged_perceptron_tagger": "averaged_perceptron_tagger_eng",
    "averaged_perceptron_tagger_ru": "averaged_perceptron_tagger_rus",
    "maxent_ne_chunker": "maxent_ne_chunker_tab",
    "maxent_treebank_pos_tagger": "maxent_treebank_pos_tagger_tab",
}


@dataclass(frozen=True)
class NltkPackage:
    """One package of the index."""

    id: str
    subdir: str
    size: int
    unzipped_size: int
    md5: str  # "" when only a sha256 is known
    unzip: bool = True
    sha256: str = ""
    url: str = ""  # a pinned URL (snapshot entries added from another commit); "" = its place in the layout

    @property
    def expected(self) -> tuple[str, str]:
        """(algorithm, hex digest) the zip is checked by: sha256 when known, else md5."""
        return ("sha256", self.sha256) if self.sha256 else ("md5", self.md5)

    @property
    def path(self) -> str:
        """Its place in the gh-pages layout and in the data dir: ``<subdir>/<id>.zip``."""
        return f"{self.subdir}/{self.id}.zip"


@dataclass(frozen=True)
class NltkIndex:
    """The ids an index knows: packages and collections (of packages or collections)."""

    packages: dict[str, NltkPackage]
    collections: dict[str, tuple[str, ...]] = field(default_factory=dict)
    source: str = ""  # where it came from (a URL, or the snapshot's origin and date)

    def expand(self, ids: Sequence[str], *, successors: bool = False) -> list[NltkPackage]:
        """The packages ``ids`` name, collections expanded (recursively), each once, in order;
        ``successors``: then the successor of each retired pickle package reached, when this
        index has it (what ``nltk.download`` installs with it: :data:`SUCCESSORS`).

        Raises:
            UsageError: an id the index does not know.
        """
        out: dict[str, NltkPackage] = {}
        # Depth first, in the index's order, without recursion and each collection once: a hostile
        # index may chain collections deeper than Python recurses, loop them, or share them as a
        # lattice (c0 -> [c1, c1b] -> [c2, c2b] ...) that a walk by paths would take 2**depth times.
        seen: set[str] = set()
        for ident in ids:
            stack = [iter((ident,))]
            while stack:
                child = next(stack[-1], None)
                if child is None:
                    stack.pop()
                elif child in self.packages:
                    out.setdefault(child, self.packages[child])
                elif child in self.collections:
                    if child not in seen:  # expanded already (or being expanded: a cycle)
                        seen.add(child)
                        stack.append(iter(self.collections[child]))
                else:
                    raise UsageError(f"nltk:{child} is not in the NLTK index ({self.source}); "
                                     "`prefetch get nltk:popular` gets the popular packages")
        for ident in list(out) if successors else ():
            new = SUCCESSORS.get(ident)
            if new in self.packages:
                out.setdefault(new, self.packages[new])
        return list(out.values())

    def missing(self, ids: Sequence[str]) -> list[str]:
        return [i for i in ids if i not in self.packages and i not in self.collections]


def is_nltk_name(text: str) -> bool:
    return named_by(text, SCHEME)


def parse_nltk_name(text: str) -> str:
    """``nltk:ID`` -> ID.

    Raises:
        UsageError: an empty or malformed id.
    """
    ident = text[len(SCHEME):].strip()
    if not _ID.match(ident) or ".." in ident:
        raise UsageError(f"{text!r} is not an NLTK package or collection id; give e.g. nltk:punkt_tab or nltk:popular")
    return ident


def nltk_search_path(env: Mapping[str, str]) -> list[Path]:
    """``nltk.data.path`` as nltk 3.10 builds it on POSIX (without importing nltk)."""
    from prefetch.fs.paths import expand_home

    home = env.get("HOME") or os.path.expanduser("~")
    # nltk: os.path.expanduser on each entry (``~`` and ``~user``)
    paths = [expand_home(p, env, "NLTK_DATA") for p in env.get("NLTK_DATA", "").split(os.pathsep) if p]
    paths.append(Path(home) / "nltk_data")
    prefix = Path(sys.prefix)
    paths += [prefix / "nltk_data", prefix / "share" / "nltk_data", prefix / "lib" / "nltk_data"]
    paths += [Path(p) for p in _SYSTEM_PATHS]
    return paths


def nltk_data_dir(env: Mapping[str, str]) -> Path:
    """Where ``nltk.download`` would install: the first ``NLTK_DATA`` entry, else the first
    existing writable entry of ``nltk.data.path``, else ``~/nltk_data``."""
    search = nltk_search_path(env)
    entries = [p for p in env.get("NLTK_DATA", "").split(os.pathsep) if p]
    if entries:
        return search[0]
    for path in search:
        if path.is_dir() and os.access(path, os.W_OK | os.X_OK):
            return path
    return Path(env.get("HOME") or os.path.expanduser("~")) / "nltk_data"


def not_private(data_dir: Path, subdirs) -> str | None:
    """Why nltk 3.10 would not read what is installed here, or None: the first existing folder of
    ``data_dir`` and ``data_dir/<subdir>`` (links followed) that another account owns (root is
    trusted) or can write, judged as its downloader judges the folders it installs into before it
    refuses to (``_make_install_dirs``)."""
    me = os.geteuid() if hasattr(os, "geteuid") else -1
    if me < 0:
        return None
    chain = [data_dir]
    for subdir in sorted(set(subdirs)):
        here = data_dir
        for part in subdir.split("/"):
            if part:
                here = here / part
                chain.append(here)
    for folder in dict.fromkeys(chain):
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if st.st_uid not in (me, 0) or st.st_mode & 0o022:
            return (f"nltk will not read data from {folder} (mode {st.st_mode & 0o7777:04o}, uid {st.st_uid}): "
                    "another account could write it; nltk.download refuses to install there too. "
                    f"Make it private to its owner (chmod go-w {folder}) or choose another NLTK_DATA")
    return None


def parse_index(data: bytes, *, source: str) -> NltkIndex:
    """An ``index.xml`` -> ``NltkIndex`` (every package's id, subdir and hash checked).

    Raises:
        NetworkError: not an NLTK index (a web page, a broken file), or a package entry
            whose id or subdir could leave the data dir.
    """
    import xml.etree.ElementTree as ET

    if b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data:
        raise NetworkError(f"{source} is not an NLTK index (a DOCTYPE or entity declaration)")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise NetworkError(f"{source} is not an NLTK index.xml ({exc}); a web page or a broken mirror?") from None
    if root.tag != "nltk_data":
        raise NetworkError(f"{source} is not an NLTK index.xml (its root is <{root.tag}>, not <nltk_data>)")
    packages: dict[str, NltkPackage] = {}
    for elem in root.iter("package"):
        a = elem.attrib
        try:
            pkg = NltkPackage(id=a["id"], subdir=a.get("subdir", ""), size=int(a["size"]),
                              unzipped_size=int(a.get("unzipped_size", "0")), md5=a.get("checksum", "").lower(),
                              unzip=a.get("unzip", "1") != "0", sha256=a.get("sha256_checksum", "").lower())
        except (KeyError, ValueError):
            raise NetworkError(f"{source}: a malformed package entry {dict(a)!r:.200}") from None
        _check_package(pkg, source)
        packages[pkg.id] = pkg
    collections = {c.attrib.get("id", ""): tuple(i.attrib.get("ref", "") for i in c.iter("item"))
                   for c in root.iter("collection")}
    return NltkIndex(packages=packages, collections=collections, source=source)


def _check_package(pkg: NltkPackage, source: str) -> None:
    parts = PurePosixPath(pkg.subdir).parts
    if not _ID.match(pkg.id) or ".." in pkg.id or not _SUBDIR.match(pkg.subdir) or ".." in parts \
            or not (_MD5.match(pkg.md5) or (not pkg.md5 and pkg.sha256)) \
            or (pkg.sha256 and not _SHA256.match(pkg.sha256)) or pkg.size < 0 or pkg.unzipped_size < 0:
        raise NetworkError(f"{source}: refusing package entry {pkg.id!r} (subdir {pkg.subdir!r}): "
                           "an unsafe id or subdir, or a malformed md5 or size")


def load_snapshot() -> NltkIndex:
    """The built-in snapshot of the index facts (``nltk_index.json``)."""
    raw = json.loads((Path(__file__).with_name("nltk_index.json")).read_text(encoding="utf-8"))
    packages = {ident: NltkPackage(id=ident, subdir=p["subdir"], size=p["size"], unzipped_size=p["unzipped_size"],
                                   md5=p.get("md5", ""), unzip=p["unzip"], sha256=p.get("sha256", ""),
                                   url=p.get("url", "")) for ident, p in raw["packages"].items()}
    source = f"prefetch's built-in snapshot of {raw['source']} of {raw['date']}"
    if raw.get("added"):
        source += f", with {sum(1 for p in raw['packages'].values() if p.get('url'))} packages added from commit " \
                  f"{raw['added']['commit'][:12]}"
    return NltkIndex(packages=packages, collections={k: tuple(v) for k, v in raw["collections"].items()},
                     source=source)


def package_url(base: str, pkg: NltkPackage) -> str:
    """``BASE/packages/<subdir>/<id>.zip`` (the gh-pages layout)."""
    from urllib.parse import quote

    path = pkg.path if base[:5].lower() == "s3://" else quote(pkg.path)  # an s3:// object URL names its key raw
    return f"{base.rstrip('/')}/packages/{path}"


def merge_index(old: NltkIndex | None, packages: Sequence[NltkPackage],
                collections: Mapping[str, Sequence[str]], *, source: str) -> NltkIndex:
    """``old`` with ``packages`` and ``collections`` added (an entry of the same id replaced)."""
    merged = dict(old.packages) if old else {}
    merged.update({p.id: p for p in packages})
    groups = dict(old.collections) if old else {}
    groups.update({k: tuple(v) for k, v in collections.items()})
    return NltkIndex(packages=dict(sorted(merged.items())), collections=dict(sorted(groups.items())), source=source)


def render_index(index: NltkIndex, *, base_url: str = "") -> bytes:
    """``index.xml`` as nltk's ``build_index`` writes it (the attributes nltk 3.10 reads).

    Each ``url`` names the package's place under ``base_url``, or, without one, its place
    relative to the index (``packages/<subdir>/<id>.zip``: where a copy is served is not
    known when it is written). prefetch never follows it: a mirror's packages are fetched
    by their place in the layout.
    """
    import xml.etree.ElementTree as ET
    from urllib.parse import quote

    root = ET.Element("nltk_data")
    packages = ET.SubElement(root, "packages")
    for pkg in index.packages.values():
        attrs = {"id": pkg.id, "name": pkg.id, "subdir": pkg.subdir, "size": str(pkg.size),
                 "unzipped_size": str(pkg.unzipped_size), "unzip": "1" if pkg.unzip else "0",
                 "url": package_url(base_url, pkg) if base_url else f"packages/{quote(pkg.path)}"}
        if pkg.md5:
            attrs["checksum"] = pkg.md5
        if pkg.sha256:
            attrs["sha256_checksum"] = pkg.sha256
        ET.SubElement(packages, "package", attrs)
    groups = ET.SubElement(root, "collections")
    for ident, items in index.collections.items():
        elem = ET.SubElement(groups, "collection", {"id": ident, "name": ident})
        for item in items:
            ET.SubElement(elem, "item", {"ref": item})
    ET.indent(root)
    return ('<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n").encode("utf-8")
