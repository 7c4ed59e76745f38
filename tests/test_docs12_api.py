"""``ensure(urls=...)`` as python-api.md writes it: the URL options as keywords, no names needed.

python-api.md: "`ensure()` also takes the URL options as keywords: `urls=[{"url": ..., ...}]`";
``as_completed(urls=...)`` always took them alone. ``ensure`` required a positional ``names``
(``ensure([], urls=...)``), so the call the page shows ended in a ``TypeError`` (missing
argument), not a download, and not the API's one-line ``UsageError`` either.
"""

from __future__ import annotations

import hashlib

import pytest

import prefetch


@pytest.fixture
def url(origin, home):
    origin.put("a.bin", b"x" * 1000)
    return origin.url_for("a.bin")


def test_ensure_takes_urls_alone(url, tmp_path):
    sha = hashlib.sha256(b"x" * 1000).hexdigest()
    results = prefetch.ensure(urls=[{"url": url, "sha256": sha, "out": "A.bin"}], output_dir=str(tmp_path),
                              progress=False)
    assert [r.path for r in results] == [str(tmp_path / "A.bin")]
    assert (tmp_path / "A.bin").read_bytes() == b"x" * 1000
    assert [r.status for r in prefetch.ensure(urls=url, output_dir=str(tmp_path), progress=False)] == ["downloaded"]


def test_ensure_with_nothing_to_get_is_one_usage_error(home, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for call in (lambda: prefetch.ensure(), lambda: prefetch.ensure(background=True), lambda: prefetch.ensure(urls=[])):
        with pytest.raises(prefetch.UsageError) as caught:
            call()
        assert len(str(caught.value).splitlines()) == 1 and "urls=" in str(caught.value)
    assert not list(work.iterdir())
