"""The link a plain URL's file came from (``net/urls.link_key``): the same link spelled another
way is the same file, and a query that names a file is not taken for a signature (real nginx
on 127.0.0.1).

Before, the key hashed the host as typed and the scheme's own port as given, so
``http://LocalHost:P/x.csv`` after ``http://localhost:P/x.csv`` (DNS names know no case; a
link copied from a page that capitalises its host, ``:443`` pasted or not) was "from another
link": the whole file downloaded again and replaced. And an Azure SAS's field names (``sp``,
``st``, ``se``, ``sr``, ``ss``...) were dropped from every URL, so ``?sp=train`` and
``?sp=test`` (a query that chooses the file) were one link: the second said "cached" and
left the first one's bytes in place.
"""

from __future__ import annotations

import pytest

from prefetch.net.urls import link_key
from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_links_identity import V1, V2, www


@pytest.fixture
def nginx(tmp_path):
    # ?sp=test chooses the other file, as a query of a dataset's API does
    with NginxServer(www(tmp_path), location='if ($arg_sp = "test") { rewrite ^/v1/x.csv$ /v2/x.csv break; }') as server:
        yield server


def _asked(nginx) -> int:
    return len(nginx.served())


def test_the_hosts_case_and_its_schemes_port_name_the_same_link(nginx, home, tmp_path):
    out = tmp_path / "data" / "x.csv"
    lower = nginx.url_for("v1/x.csv").replace("127.0.0.1", "localhost")
    first = run_cli("get", lower, "-o", str(out), cwd=tmp_path)
    assert first.returncode == 0 and out.read_bytes() == V1, first.stderr
    asked = _asked(nginx)
    again = run_cli("get", lower.replace("http://localhost", "HTTP://LocalHost"), "-o", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "downloaded from another link" not in again.stderr, again.stderr
    assert "cached" in again.stderr, again.stderr
    assert _asked(nginx) == asked  # no request: the file in place is this link's


def test_a_query_that_names_the_file_is_not_a_signature(nginx, home, tmp_path):
    out = tmp_path / "x.csv"
    url = nginx.url_for("v1/x.csv")
    train = run_cli("get", url + "?sp=train", "-o", str(out), cwd=tmp_path)
    assert train.returncode == 0 and out.read_bytes() == V1, train.stderr
    test = run_cli("get", url + "?sp=test", "-o", str(out), cwd=tmp_path)
    assert test.returncode == 0, test.stderr
    assert out.read_bytes() == V2, f"?sp=train's bytes left in place for ?sp=test: {test.stderr}"
    assert "downloaded from another link" in test.stderr, test.stderr


def test_the_keys_of_links_spelled_apart():
    same = [("HTTP://Example.COM/x", "http://example.com/x"), ("http://example.com:80/x", "http://example.com/x"),
            ("https://u:p@Example.com:443/x#f", "https://example.com/x"), ("http://[::1]:80/x", "http://[::1]/x"),
            # an Azure SAS signed again (its fields with its sig), a CloudFront link signed again
            ("https://a.blob.core.windows.net/c/x?sv=1&se=2&sp=r&sig=A", "https://a.blob.core.windows.net/c/x?sv=3&sp=r&st=4&se=5&sig=B"),
            ("https://d.cloudfront.net/x?Expires=1&Signature=A&Key-Pair-Id=K",
             "https://d.cloudfront.net/x?Expires=2&Signature=B&Key-Pair-Id=K"),
            ("https://h/x?X-Amz-Date=1&X-Amz-Signature=A&token=t", "https://h/x?X-Amz-Date=2&X-Amz-Signature=B")]
    for a, b in same:
        assert link_key(a) == link_key(b), (a, b)
    apart = [("https://example.com:80/x", "https://example.com/x"), ("http://h/x?sp=train", "http://h/x?sp=test"),
             ("http://h/x?st=1", "http://h/x?st=2"), ("http://h/x?expires=1", "http://h/x?expires=2"),
             ("http://h/x?v=1", "http://h/x?v=2"), ("http://h/X", "http://h/x")]
    for a, b in apart:
        assert link_key(a) != link_key(b), (a, b)
    assert link_key("http://example.com/x") == "1e75d8e535d0"  # (a link typed in lower case keeps its key)
