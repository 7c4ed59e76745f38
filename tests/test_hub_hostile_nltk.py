"""NLTK indexes that lie, against ``get nltk:ID --mirror``: collections nested past Python's
recursion (an internal error, exit 1, before) or shared as a lattice (2**depth walks, before).

What held, tried by hand with a folder mirror: a package zip with a member ``evil/../../../``
(exit 6, nothing extracted); wrong md5s are tests/test_nltk.py's.
"""

from __future__ import annotations

from collections.abc import Mapping

from prefetch.cache import nltk_data
from tests.nltk_origin import STOPWORDS, write_gh_pages
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
