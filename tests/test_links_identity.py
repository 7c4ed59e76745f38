"""One name, another link: a plain URL's file in place is this link's only when prefetch's
record of it says so (real nginx on 127.0.0.1).

Before, ``prefetch get https://h/v1/x.csv -o data/`` then ``prefetch get https://h/v2/x.csv
-o data/`` said "cached" for the second and left v1's bytes in ``data/x.csv``: what made a
file "cached" was prefetch's completion record of that very file (path, size, inode, mtime),
which did not say which link it came from. Now the record names its link (a key of the URL
without its signature or token): a file placed from another link is downloaded again from
this one and replaced atomically once complete, with one note; the same link (signed again,
a new token) is still "cached" without a request; a ``--sha256`` given that the file matches
is still the strongest proof (cached, whatever link placed it).
"""

from __future__ import annotations

import hashlib
import os
import struct

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer

V1 = b"id,value\n" + b"1,one\n" * 2000
V2 = b"id,value\n" + b"2,two\n" * 2000  # (the same size: a size check alone cannot tell them apart)


def www(tmp_path):
    """``v1/x.csv`` and ``v2/x.csv`` (V1, V2) under ``tmp_path/www``."""
    root = tmp_path / "www"
    for folder, data in (("v1", V1), ("v2", V2)):
        (root / folder).mkdir(parents=True)
        (root / folder / "x.csv").write_bytes(data)
    return root


@pytest.fixture
def nginx(tmp_path):
    with NginxServer(www(tmp_path)) as server:
        yield server


def _asked(nginx) -> list[str]:
    return [row[4] for row in nginx.served()]


def test_the_same_name_from_another_link_is_that_links_file(nginx, home, tmp_path):
    data = tmp_path / "data"
    first = run_cli("get", nginx.url_for("v1/x.csv"), "-o", f"{data}/", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (data / "x.csv").read_bytes() == V1

    second = run_cli("get", nginx.url_for("v2/x.csv"), "-o", f"{data}/", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert (data / "x.csv").read_bytes() == V2, "v1's bytes were left in place for v2's link"
    assert "cached" not in second.stderr, second.stderr
    notes = [line for line in second.stderr.splitlines() if "downloaded from another link" in line]
    assert len(notes) == 1, second.stderr  # one line says the file there is replaced, and why
    assert sorted(os.listdir(data)) == ["x.csv"]  # (no .part or state left beside it)

    asked = len(_asked(nginx))
    again = run_cli("get", nginx.url_for("v2/x.csv"), "-o", f"{data}/", cwd=tmp_path)
    assert again.returncode == 0 and "cached" in again.stderr, again.stderr
    assert len(_asked(nginx)) == asked  # the same link: no request at all, as before

    back = run_cli("get", nginx.url_for("v1/x.csv"), "-o", f"{data}/", cwd=tmp_path)
    assert back.returncode == 0 and (data / "x.csv").read_bytes() == V1, back.stderr


def test_a_link_signed_again_is_the_same_link(nginx, home, tmp_path):
    """A presigned GET signed again (new signature, date, token) names the same file: cached,
    no request; a query that names another file (``?v=2``) is another link."""
    out = tmp_path / "x.csv"
    signed = nginx.url_for("v1/x.csv") + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261127T000000Z" \
                                         "&X-Amz-Expires=300&X-Amz-Signature=aaaa&token=one"
    first = run_cli("get", signed, "-o", str(out), cwd=tmp_path)
    assert first.returncode == 0 and out.read_bytes() == V1, first.stderr
    asked = len(_asked(nginx))
    resigned = signed.replace("20261127T000000Z", "20261127T010000Z").replace("aaaa", "bbbb").replace("one", "two")
    again = run_cli("get", resigned, "-o", str(out), cwd=tmp_path)
    assert again.returncode == 0 and "cached" in again.stderr, again.stderr
    assert len(_asked(nginx)) == asked

    other = run_cli("get", nginx.url_for("v1/x.csv") + "?v=2", "-o", str(out), cwd=tmp_path)
    assert other.returncode == 0 and "downloaded from another link" in other.stderr, other.stderr
    assert len(_asked(nginx)) == asked + 1


def test_a_given_hash_is_still_the_strongest_proof(nginx, home, tmp_path):
    """The file in place matches the --sha256 given: it is the file asked for, whichever link
    placed it (no request); a hash it does not match replaces it, as before."""
    out = tmp_path / "x.csv"
    assert run_cli("get", nginx.url_for("v1/x.csv"), "-o", str(out), cwd=tmp_path).returncode == 0
    asked = len(_asked(nginx))
    same = run_cli("get", nginx.url_for("v2/x.csv"), "-o", str(out), "--sha256", hashlib.sha256(V1).hexdigest(),
                   cwd=tmp_path)
    assert same.returncode == 0 and "cached" in same.stderr, same.stderr
    assert len(_asked(nginx)) == asked and out.read_bytes() == V1

    fixed = run_cli("get", nginx.url_for("v2/x.csv"), "-o", str(out), "--sha256", hashlib.sha256(V2).hexdigest(),
                    cwd=tmp_path)
    assert fixed.returncode == 0 and out.read_bytes() == V2, fixed.stderr


def test_a_list_of_two_links_to_one_name_is_refused_before_anything_starts(nginx, home, tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text(f"{nginx.url_for('v1/x.csv')}\n{nginx.url_for('v2/x.csv')}\n")
    got = run_cli("get", "-i", str(listing), "-P", str(tmp_path / "data"), cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    lines = [line for line in got.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "would both be saved as" in lines[0], got.stderr
    assert not (tmp_path / "data" / "x.csv").exists() and _asked(nginx) == []


def test_the_link_record_reads_back_and_old_records_name_no_link(tmp_path):
    """The attribute forms: version 2 names the link (53 bytes, as small as version 1), version
    1 (earlier runs) names none and is trusted as before."""
    from prefetch.cache import completion
    from prefetch.model.plans import FilePlan
    from prefetch.model.specs import FileSpec
    from prefetch.net.urls import link_key

    path = str(tmp_path / "x.csv")
    key = link_key("https://h/v1/x.csv?X-Amz-Signature=s")
    assert key == link_key("https://u:p@h/v1/x.csv?X-Amz-Signature=t&token=z") != link_key("https://h/v2/x.csv")
    record = {"path": path, "size": 5, "dev": 1, "ino": 2, "mtime_ns": 3, "digest": None, "algorithm": None,
              "placed": 4.0, "link": key}
    raw = completion._compact(record)
    assert len(raw) == 53 and raw[0] == 2
    assert completion._from_attribute(raw, path) == record
    assert completion._from_attribute(raw, path + "x") is None
    old = struct.pack("<BQQQqd12s", 1, 5, 1, 2, 3, 4.0, completion._path_hash(path))
    assert completion._from_attribute(old, path)["link"] is None
    plan = FilePlan(dataset="x", spec=FileSpec(name="x.csv", url="https://h/v2/x.csv", target=path),
                    final=tmp_path / "x.csv", also=(), extract_into=(), by_link=True)
    assert completion.from_other_link(record, plan)
    assert not completion.from_other_link({**record, "link": None}, plan)
    assert not completion.from_other_link(record, FilePlan(dataset="x", spec=plan.spec, final=plan.final, also=(),
                                                           extract_into=()))  # (a library cache's: by name)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/f00001.bin", "https://h:443/x%20y", "http://h", "http://h/", "http:///p", "http://h//a/./b",
    "http://h/x;params", "http://h:/x", "HTTP://h/x", "https://H.Example.COM/X", "https://u:p@h/x", "https://@h/x",
    "http://h/x?v=2", "http://h/x?X-Amz-Signature=s&v=2", "http://h/x?", "http://h/x#part", "http://h/a b",
    "http://h/a\tb", "http://h/a\nb", "http://h/\u00fc", "http://[::1]:8080/x", "http://h/x]",
    "http://h:80/x", "https://h:443/x", "http://h:443/x", "http://h:080/x", "http://h:99999/x", "http://Host:8/x"])
def test_a_links_key_is_its_url_split_joined_and_hashed(url):
    """``link_key`` hashes a plain link (no user, query or fragment, nothing urlsplit strips) as
    it is, without the split and join (~10 us a file in a list of thousands): the key is the
    one the split and join give, whatever the URL; ``redact_url`` (a file's log line, record
    and result) gives such a link back as it is, and anything else split and joined."""
    from urllib.parse import urlsplit

    from prefetch.net.urls import _SECRET_PARAMS, _split_bare_link, bare_link, link_key, redact_url

    parts = urlsplit(url)
    bare = _split_bare_link(url)  # (the definition: split, stripped, host in lower case, joined)
    assert bare_link(url) == bare
    assert link_key(url) == hashlib.blake2b(bare.encode("utf-8", "surrogateescape"), digest_size=6).hexdigest()
    query = parts.query
    if query and any(p.partition("=")[0].lower() in _SECRET_PARAMS for p in query.split("&")):
        query = "(signed)"
    assert redact_url(url) == parts._replace(netloc=parts.netloc.rpartition("@")[2], query=query).geturl()


def test_a_served_name_taken_by_another_links_file_of_the_same_size_is_not_this_one(home, tmp_path):
    """``--content-disposition``: two links whose server names both ``data.csv``, of one size.
    Before, the second found the first's file there "complete" (the size matched) and said
    cached, with the first's bytes; now its record names the other link: saved under the URL's
    name, with the note."""
    root = tmp_path / "www"
    (root / "files").mkdir(parents=True)
    (root / "files" / "1").write_bytes(V1)
    (root / "files" / "2").write_bytes(V2)
    location = "\n".join(f"location = /files/{i} {{ add_header Content-Disposition 'attachment; "
                         f"filename=\"data.csv\"'; }}" for i in (1, 2))
    out = tmp_path / "out"
    with NginxServer(root, location=location) as server:
        for i in (1, 2):
            got = run_cli("get", server.url_for(f"files/{i}"), "--content-disposition", "-P", str(out), cwd=tmp_path)
            assert got.returncode == 0, got.stderr
    assert sorted(os.listdir(out)) == ["2", "data.csv"], os.listdir(out)
    assert (out / "data.csv").read_bytes() == V1 and (out / "2").read_bytes() == V2
    assert "a file prefetch downloaded from another link" in got.stderr, got.stderr
