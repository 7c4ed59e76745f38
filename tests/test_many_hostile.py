"""A hostile review of many files at once (#19): unusual lists and servers against the
scheduler and each file's tail (verify, rename, record). Real servers on 127.0.0.1 and the
real CLI, as the rest of the suite."""

from __future__ import annotations

import hashlib
import os

import pytest


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def two_files(origin):
    a, b = os.urandom(5000), os.urandom(7000)
    origin.put("a.bin", a)
    origin.put("b.bin", b)
    return a, b


@pytest.mark.parametrize("order", ["hash-second", "hash-first"])
def test_a_url_listed_twice_keeps_the_hash_either_line_gives(home, tmp_path, cli, origin, two_files, order):
    """The same URL on two lines, one of them with a sha256 that the file does not have: the
    hash is checked (exit 4, nothing placed), whichever line carries it. Before, the second
    line was dropped as a duplicate with its hash, so the file landed unverified (exit 0)."""
    a, b = two_files
    url = origin.url_for("a.bin")
    lines = [url, f"{url} sha256={_sha(b)}"]
    if order == "hash-first":
        lines.reverse()
    listing = tmp_path / "urls.txt"
    listing.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
    assert proc.returncode == 4, proc.stderr
    assert "mismatch" in proc.stderr
    assert not (out / "a.bin").exists(), "a file that fails the hash one line asked for is never placed"


def test_a_url_listed_twice_with_its_right_hash_once_is_verified(home, tmp_path, cli, origin, two_files):
    """The same URL without a hash, then with its right one: fetched once, and verified."""
    a, _ = two_files
    url = origin.url_for("a.bin")
    out = tmp_path / "out"
    proc = cli("get", url, f"{url}#sha256={_sha(a)}", "-P", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert (out / "a.bin").read_bytes() == a
    assert "\"verified\": true" in proc.stdout, proc.stdout
    assert len(origin.data_requests("a.bin")) == 1, "one file, fetched once"


def test_a_url_listed_twice_with_two_hashes_is_a_usage_error(home, tmp_path, cli, origin, two_files):
    """Two different hashes for one URL saved to one name: a usage error (exit 2) naming the
    URL, before anything is fetched."""
    a, b = two_files
    url = origin.url_for("a.bin")
    listing = tmp_path / "urls.txt"
    listing.write_text(f"{url} sha256={_sha(a)}\n{url} sha256={_sha(b)}\n")
    proc = cli("get", "-i", str(listing), "-P", str(tmp_path / "out"), "-q")
    assert proc.returncode == 2, proc.stderr
    assert "a.bin" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert origin.data_requests("a.bin") == []


def test_an_escaped_slash_in_a_file_url_never_leads_out_of_the_output_dir(home, tmp_path, cli):
    """``file:///src/sub/..%2f..%2fsrc%2fsub%2fx.bin`` names the local file /src/sub/x.bin; saved
    with -P DIR it is DIR/x.bin (the file's own name). Before, the unquoted last segment,
    ``../../src/sub/x.bin``, was taken as the name and the copy went outside DIR."""
    src = tmp_path / "src" / "sub"
    src.mkdir(parents=True)
    data = os.urandom(3000)
    (src / "x.bin").write_bytes(data)
    out = tmp_path / "dl" / "out"
    listing = tmp_path / "urls.txt"
    listing.write_text(f"file://{src}/..%2f..%2fsrc%2fsub%2fx.bin\n")
    home_dir = tmp_path / "home"  # (prefetch's own state)
    before = {p for p in tmp_path.rglob("*") if home_dir not in p.parents}
    proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert (out / "x.bin").read_bytes() == data
    made = sorted({p for p in tmp_path.rglob("*") if home_dir not in p.parents} - before
                  - {out.parent, out, out / "x.bin"})
    assert made == [], f"written outside {out}: {made}"


@pytest.mark.parametrize("order", ["file-first", "folder-first"])
def test_one_file_the_folder_of_another_is_a_usage_error(home, tmp_path, cli, origin, two_files, order):
    """``out=x`` and ``out=x/y`` in one list: a usage error (exit 2) naming both, before anything
    is fetched. Before, both downloaded and the one that landed second failed (exit 5), which
    one depending on the race."""
    lines = [f"{origin.url_for('a.bin')} out=x", f"{origin.url_for('b.bin')} out=x/sub/y"]
    if order == "folder-first":
        lines.reverse()
    listing = tmp_path / "urls.txt"
    listing.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
    assert proc.returncode == 2, proc.stderr
    assert "a.bin" in proc.stderr and "b.bin" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert origin.data_requests("a.bin") == [] and origin.data_requests("b.bin") == []


def test_a_file_where_a_folder_of_the_output_goes_is_named(home, tmp_path, cli, origin, two_files):
    """``out=a.bin/x`` where a.bin is a file already: exit 5, one line naming that file as the
    reason (before: 'cannot write .../a.bin: File exists'); the list's other file lands."""
    a, b = two_files
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.bin").write_bytes(b"mine")
    listing = tmp_path / "urls.txt"
    listing.write_text(f"{origin.url_for('a.bin')} out=a.bin/x\n{origin.url_for('b.bin')}\n")
    proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"{out / 'a.bin'} is a file, not a folder" in proc.stderr, proc.stderr
    assert (out / "a.bin").read_bytes() == b"mine" and (out / "b.bin").read_bytes() == b
