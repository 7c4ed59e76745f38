"""A hostile review of hash inputs: spellings people paste, other algorithms, checksum-file lines."""

from __future__ import annotations

import hashlib

import pytest

from prefetch.errors import BadHashError, ExitCode
from prefetch.model.specs import ExpectedHash, parse_hash

DATA = b"hashes\n" * 1000
SHA = hashlib.sha256(DATA).hexdigest()
MD5 = hashlib.md5(DATA).hexdigest()


@pytest.mark.parametrize("text", [f"sha-256:{SHA}", f"SHA-256:{SHA.upper()}", f"sha256: {SHA}",
                                  f" sha256 :\t{SHA} "])
def test_the_sri_and_aria2c_spellings_of_sha256_are_accepted(text):
    assert parse_hash(text) == ExpectedHash("sha256", SHA)
    assert parse_hash(text, algorithm="sha256") == ExpectedHash("sha256", SHA)


@pytest.mark.parametrize(("algorithm", "name"), [("sha1", "sha1"), ("sha224", "sha224"), ("sha384", "sha384"),
                                                 ("sha512", "sha512")])
def test_another_algorithms_digest_is_named_by_its_length(algorithm, name):
    digest = hashlib.new(algorithm, DATA).hexdigest()
    for given in ("auto", "sha256", "md5"):
        with pytest.raises(BadHashError) as info:
            parse_hash(digest, algorithm=given)
        assert f"the length of a {name}, which prefetch does not check" in str(info.value)


@pytest.mark.parametrize("line", [f"{SHA}  a.bin", f"{SHA} *a.bin", f"{SHA.upper()}  data/b.tar.gz"])
def test_a_checksum_file_line_is_refused_as_such(line):
    """``sha256sum`` prints ``HASH  NAME`` (``*NAME`` in binary mode): the name may be another
    file's, so the hash is never taken from it silently."""
    with pytest.raises(BadHashError) as info:
        parse_hash(line, algorithm="sha256")
    assert "is a checksum file's line" in str(info.value)
    assert info.value.exit_code == ExitCode.USAGE


def test_through_get(cli, origin, tmp_path):
    origin.put("h.bin", DATA)

    proc = cli("get", origin.url_for("h.bin"), "-P", str(tmp_path / "a"), "--sha256", f"SHA-256:{SHA}")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a" / "h.bin").read_bytes() == DATA

    proc = cli("get", origin.url_for("h.bin"), "-P", str(tmp_path / "b"), "--sha256", f"{SHA} *h.bin")
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.strip().splitlines() == [
        f"prefetch: error: hash '{SHA} *h.bin' is a checksum file's line (HASH  NAME), which may be another "
        "file's; give the hash alone"]
    assert not origin.data_requests("h.bin")[1:]  # (refused before any download)


def test_a_prefix_naming_another_algorithm_is_refused_not_taken_as_that_one(cli, origin, tmp_path):
    """``--md5 sha256:HEX`` was read as a second sha256 (a ``--sha256`` beside it then made two
    values of one algorithm, or the md5 the user meant to check was never checked): which hash was
    meant is not for prefetch to guess; one line, exit 2, nothing downloaded."""
    origin.put("h.bin", DATA)
    for option, text in (("--md5", f"sha256:{SHA}"), ("--sha256", f"md5:{MD5}")):
        proc = cli("get", origin.url_for("h.bin"), "-P", str(tmp_path / "a"), "--sha256", SHA, option, text)
        assert proc.returncode == ExitCode.USAGE, (option, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "where" in proc.stderr, proc.stderr
    assert not origin.data_requests("h.bin")
    assert not (tmp_path / "a" / "h.bin").exists()
    with pytest.raises(BadHashError):
        parse_hash(f"sha256:{SHA}", algorithm="md5")
    assert parse_hash(f"md5:{MD5}", algorithm="md5") == ExpectedHash("md5", MD5)


def test_export_keeps_the_sums_it_did_not_write(home, cli, origin, tmp_path):
    """A mirror directory's SHA256SUMS written by ``sha256sum -b`` (``HASH *NAME``), in capitals,
    or in BSD form (``SHA256 (NAME) = HASH``): export adds its files' lines and keeps the others'
    (before, every line but ``HASH  NAME`` ones was dropped)."""
    import subprocess

    from tests.test_store import cached_toy

    reg, files = cached_toy(tmp_path, origin, cli, sizes=(1000, 2000))
    out = tmp_path / "www"
    out.mkdir()
    mine = {"notes.txt": b"the team's notes\n", "model.bin": b"\x00weights" * 100, "old.csv": b"a,b\n1,2\n"}
    for name, data in mine.items():
        (out / name).write_bytes(data)
    digest = {n: hashlib.sha256(d).hexdigest() for n, d in mine.items()}
    (out / "SHA256SUMS").write_text(f"{digest['notes.txt']} *notes.txt\n"
                                    f"{digest['model.bin'].upper()}  model.bin\n"
                                    f"SHA256 (old.csv) = {digest['old.csv']}\n")

    proc = cli("export", str(out), "toy", "--registry", reg)

    assert proc.returncode == 0, proc.stderr
    check = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert sorted(line.rpartition(": ")[0] for line in check.stdout.splitlines()) == sorted([*files, *mine])
