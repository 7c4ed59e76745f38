"""NLTK mirrors that lie, against ``get nltk:ID --mirror``.

* Collections nested past Python's recursion (an internal error, exit 1, before) or shared as
  a lattice (2**depth walks, before).
* ``nltk:punkt`` (or a collection holding it, as ``popular`` does) without ``punkt_tab``: nltk's
  downloader installs a retired pickle package's successor with it (nltk #3394), and nltk 3.10
  tokenizes with the successor; prefetch placed the pickles only, so ``sent_tokenize`` failed
  offline after ``get nltk:popular``.
* A package zip with members outside its own ``<id>/`` folder (``stopwords/english`` inside
  ``nltk:evil``) replaced another package's files; one that expands far past its index's
  ``unzipped_size`` was placed whole. nltk's own downloader refuses both (its member
  ownership check and ``UNZIPPED_SIZE_SLACK``); so does prefetch now: exit 6, nothing extracted.

What held, tried by hand with a folder mirror: a package zip with a member ``evil/../../../``
or an absolute one (exit 6, nothing extracted), a zip of another size than the index's
(exit 4); wrong md5s are tests/test_nltk.py's.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from prefetch.cache import nltk_data
from tests.nltk_origin import STOPWORDS, _zip, write_gh_pages
from tests.test_nltk import run_offline


def test_collections_nested_deeper_than_python_recurses_still_expand(cli, home, tmp_path, monkeypatch):
    depth = 3000  # Python's recursion limit is 1000
    chain = {f"c{i}": [f"c{i + 1}"] for i in range(depth)}
    write_gh_pages(tmp_path / "mirror", collections={**chain, f"c{depth}": ["stopwords", "c0"]})  # and a cycle
    monkeypatch.setenv("NLTK_DATA", str(home / "nltk_data"))
    done = cli("get", "nltk:c0", "--mirror", str(tmp_path / "mirror"))
    assert done.returncode == 0, done.stderr
    out = run_offline('out["words"] = nltk.corpus.stopwords.words("english")', "corpora/stopwords", dict(
        __import__("os").environ))
    assert out["words"] == STOPWORDS


class _Counted(Mapping):
    """A collections mapping that counts lookups (how many times a walk expands a collection)."""

    def __init__(self, data: dict):
        self.data, self.lookups = data, 0

    def __getitem__(self, key):
        self.lookups += 1
        if self.lookups > 10_000:
            raise AssertionError("the walk expands collections by paths, not once each")
        return self.data[key]

    def __contains__(self, key):
        return key in self.data

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)


def test_a_lattice_of_collections_is_expanded_once_each():
    levels = 64  # 2**64 paths from the top
    groups = {f"c{i}": (f"c{i + 1}", f"d{i + 1}") for i in range(levels)}
    groups |= {f"d{i}": (f"c{i}",) for i in range(1, levels + 1)}
    groups[f"c{levels}"] = ("pkg",)
    pkg = nltk_data.NltkPackage(id="pkg", subdir="corpora", size=1, unzipped_size=1, md5="0" * 32)
    counted = _Counted(groups)
    index = nltk_data.NltkIndex(packages={"pkg": pkg}, collections=counted, source="a lattice")
    assert index.expand(["c0"]) == [pkg]
    assert counted.lookups <= len(groups)


def _add_package(mirror: Path, ident: str, files: dict[str, bytes], *, unzipped_size: int | None = None,
                 subdir: str = "corpora") -> None:
    """A package in a mirror ``write_gh_pages`` made, its zip as the index describes it."""
    data = _zip(files)
    (mirror / "packages" / subdir / f"{ident}.zip").write_bytes(data)
    unzipped = sum(len(v) for v in files.values()) if unzipped_size is None else unzipped_size
    index = mirror / "index.xml"
    index.write_text(index.read_text().replace("  </packages>", (
        f'    <package id="{ident}" name="{ident}" unzip="1" unzipped_size="{unzipped}" size="{len(data)}" '
        f'checksum="{hashlib.md5(data).hexdigest()}" subdir="{subdir}" />\n  </packages>')))


def _refused_unsafe(done) -> str:
    assert done.returncode == 6, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("prefetch: error: unsafe archive") and "Traceback" not in done.stderr
    return last


def test_a_package_never_replaces_another_packages_files(cli, home, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    write_gh_pages(mirror)
    _add_package(mirror, "evil", {"evil/README": b"a package\n", "stopwords/english": b"HIJACKED\n"})
    monkeypatch.setenv("NLTK_DATA", str(home / "nltk_data"))
    assert cli("get", "nltk:stopwords", "--mirror", str(mirror)).returncode == 0
    line = _refused_unsafe(cli("get", "nltk:evil", "--mirror", str(mirror)))
    assert "'stopwords' is outside the folder 'evil'" in line
    corpora = home / "nltk_data" / "corpora"
    assert sorted(p.name for p in corpora.iterdir()) == ["stopwords", "stopwords.zip"]  # nothing of evil's
    out = run_offline('out["words"] = nltk.corpus.stopwords.words("english")', "corpora/stopwords", dict(os.environ))
    assert out["words"] == STOPWORDS


def test_a_package_expanding_past_its_indexed_unzipped_size_is_refused(cli, home, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    write_gh_pages(mirror)
    body = os.urandom(3 << 20)  # incompressible: no ratio limit applies, only the index's size
    _add_package(mirror, "big", {"big/data": body}, unzipped_size=1000)
    _add_package(mirror, "fits", {"fits/data": body[:1 << 20]}, unzipped_size=1000)  # within nltk's 1 MiB slack
    monkeypatch.setenv("NLTK_DATA", str(home / "nltk_data"))
    _refused_unsafe(cli("get", "nltk:big", "--mirror", str(mirror)))
    assert not (home / "nltk_data" / "corpora" / "big").exists()
    done = cli("get", "nltk:fits", "--mirror", str(mirror))
    assert done.returncode == 0, done.stderr
    assert (home / "nltk_data" / "corpora" / "fits" / "data").read_bytes() == body[:1 << 20]


def test_a_retired_pickle_package_brings_its_successor_as_nltk_download_does(cli, home, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    write_gh_pages(mirror, collections={"mine": ["punkt", "stopwords"]})  # it has punkt_tab
    _add_package(mirror, "punkt", {"punkt/README": b"the retired pickle models\n"}, subdir="tokenizers")
    monkeypatch.setenv("NLTK_DATA", str(home / "nltk_data"))
    done = cli("get", "nltk:mine", "--mirror", str(mirror))
    assert done.returncode == 0, done.stderr
    tokenizers = home / "nltk_data" / "tokenizers"
    assert sorted(p.name for p in tokenizers.iterdir()) == ["punkt", "punkt.zip", "punkt_tab", "punkt_tab.zip"]
    out = run_offline('out["s"] = nltk.sent_tokenize("Dr. Smith came. He sat.")', "tokenizers/punkt_tab",
                      dict(os.environ))  # what nltk 3.10 tokenizes with: punkt_tab, not the pickles
    assert out["s"] == ["Dr. Smith came.", "He sat."]
