"""Hashes: algorithm by length (as Keras does), incremental hashing, `prefetch verify`."""

from __future__ import annotations

import hashlib
import os

import pytest

from prefetch.errors import BadHashError, ExitCode, HashMismatchError
from prefetch.model.specs import ExpectedHash, parse_hash
from prefetch.fs.hashing import blake2b, check_hash, hash_file, new_hasher, sha1, update_from_file, verify_file
from tests import datasets_synth
from tests.conftest import run_cli

SHA = hashlib.sha256(b"abc").hexdigest()
MD5 = hashlib.md5(b"abc").hexdigest()


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


# --------------------------------------------------------------------------- parse_hash


def test_length_picks_the_algorithm_like_keras():
    assert parse_hash(SHA) == ExpectedHash("sha256", SHA)
    assert parse_hash(MD5) == ExpectedHash("md5", MD5)


def test_prefix_case_and_spaces():
    assert parse_hash(f"  SHA256:{SHA.upper()} ") == ExpectedHash("sha256", SHA)
    assert parse_hash(f"md5:{MD5}") == ExpectedHash("md5", MD5)
    assert parse_hash(SHA, algorithm="sha256").algorithm == "sha256"
    assert str(parse_hash(MD5)) == f"md5:{MD5}"


@pytest.mark.parametrize(
    ("text", "algorithm", "message"),
    [
        ("xyz", "auto", "not hexadecimal"),
        ("", "auto", "not hexadecimal"),
        ("g" * 64, "auto", "not hexadecimal"),
        ("ab" * 20, "auto", "md5 hash must be 32 hex digits, got 40"),  # Keras: not 64 -> md5
        (MD5, "sha256", "sha256 hash must be 64 hex digits, got 32"),
        (SHA, "md5", "md5 hash must be 32 hex digits, got 64"),
        (f"sha1:{'a' * 40}", "auto", "unsupported hash algorithm 'sha1'"),
    ],
)
def test_bad_hashes_are_usage_errors(text, algorithm, message):
    with pytest.raises(BadHashError) as info:
        parse_hash(text, algorithm=algorithm)
    assert message in str(info.value)
    assert info.value.exit_code == ExitCode.USAGE


# --------------------------------------------------------------------------- hashing


def test_hash_file_and_incremental_ranges(tmp_path):
    data = os.urandom(3 * (1 << 20) + 123)  # more than one internal read
    path = tmp_path / "f.bin"
    path.write_bytes(data)

    assert hash_file(path) == hashlib.sha256(data).hexdigest()
    assert hash_file(path, "md5") == hashlib.md5(data).hexdigest()
    assert hash_file(path, length=1000) == hashlib.sha256(data[:1000]).hexdigest()
    hasher = new_hasher("sha256")
    assert update_from_file(hasher, path, 0, 1_500_000) == 1_500_000
    assert update_from_file(hasher, path, 1_500_000, None) == len(data) - 1_500_000
    assert hasher.hexdigest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("data", [b"", b"abc", "/tmp/d\u00e9j\u00e0/x.bin".encode(), os.urandom(100_000)])
def test_the_names_hashed_without_hashlib_hash_as_hashlib_does(data):
    """A lock's key and a completion record's path hash (the builtin _sha1 and _blake2, not
    hashlib's OpenSSL) are the digests they were with hashlib: keys and records stay valid."""
    from prefetch.cache.completion import _path_hash
    from prefetch.fs.locks import lock_key

    assert sha1(data).hexdigest() == hashlib.sha1(data).hexdigest()
    assert blake2b(data, digest_size=12).digest() == hashlib.blake2b(data, digest_size=12).digest()
    name = "/srv/data/f" + data.hex()[:40]
    assert lock_key(name) == hashlib.sha1(name.encode()).hexdigest()[:20]
    assert _path_hash(name) == hashlib.blake2b(name.encode(), digest_size=12).digest()


def test_check_hash_says_expected_and_got(tmp_path):
    expected = ExpectedHash("sha256", SHA)
    check_hash(SHA.upper(), expected, what="x")  # no error
    with pytest.raises(HashMismatchError) as info:
        check_hash("0" * 64, expected, what="mnist.npz")
    message = str(info.value)
    assert message.startswith("mnist.npz: sha256 mismatch")
    assert f"expected {SHA}" in message and f"got {'0' * 64}" in message
    assert info.value.exit_code == ExitCode.INTEGRITY

    path = tmp_path / "abc"
    path.write_bytes(b"abc")
    verify_file(path, expected)
    verify_file(path, ExpectedHash("md5", MD5))
    path.write_bytes(b"abd")
    with pytest.raises(HashMismatchError):
        verify_file(path, expected)


# --------------------------------------------------------------------------- the CLI


def test_bad_sha256_on_the_cli_exits_2(home, tmp_path):
    proc = run_cli("get", "http://127.0.0.1:9/x.bin", "-o", str(tmp_path / "x.bin"), "--sha256", "xyz")

    assert proc.returncode == 2
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and "'xyz' is not hexadecimal" in errors[0]


@pytest.fixture
def cached(origin, home, tmp_path):
    """mnist, cifar10 and fashion_mnist (synthetic) fetched into the test's KERAS_HOME."""
    files = datasets_synth.build_files()
    datasets_synth.serve_files(origin, files)
    registry = datasets_synth.write_registry(
        tmp_path / "synth.toml", origin.url, files, names=["mnist", "cifar10", "fashion_mnist"]
    )
    proc = run_cli("get", "mnist", "cifar10", "fashion_mnist", "--registry", str(registry))
    assert proc.returncode == 0, proc.stderr
    return registry, home / ".keras" / "datasets", files


def test_verify_name_ok(cached):
    registry, datasets, files = cached

    proc = run_cli("verify", "mnist", "cifar10", "--registry", str(registry))

    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    mnist_sha = hashlib.sha256(files["mnist.npz"]).hexdigest()
    assert lines[0] == f"ok        {datasets / 'mnist.npz'}  sha256 ok"
    # Both names of the cifar archive are checked.
    assert f"ok        {datasets / 'cifar-10-batches-py.tar.gz'}  sha256 ok" in lines
    assert f"ok        {datasets / 'cifar-10-batches-py-target_archive'}  sha256 ok" in lines
    assert len(lines) == 3 and mnist_sha not in proc.stdout


def test_verify_detects_a_changed_file_exit_4(cached):
    registry, datasets, files = cached
    mnist = datasets / "mnist.npz"
    corrupted = bytearray(files["mnist.npz"])
    corrupted[len(corrupted) // 2] ^= 0xFF
    mnist.write_bytes(bytes(corrupted))

    proc = run_cli("verify", "mnist", "--registry", str(registry))

    assert proc.returncode == 4
    expected = hashlib.sha256(files["mnist.npz"]).hexdigest()
    got = hashlib.sha256(mnist.read_bytes()).hexdigest()
    assert proc.stdout.splitlines() == [f"mismatch  {mnist}  sha256 expected {expected}, got {got}"]
    assert len(error_lines(proc.stderr)) == 1

    by_path = run_cli("verify", str(mnist), "--registry", str(registry))
    assert by_path.returncode == 4
    assert "mismatch" in by_path.stdout

    # `prefetch get` replaces the bad file, after which verify is happy again.
    assert run_cli("get", "mnist", "--registry", str(registry)).returncode == 0
    assert mnist.read_bytes() == files["mnist.npz"]
    assert run_cli("verify", "mnist", "--registry", str(registry)).returncode == 0


def test_verify_path_uses_the_registry_hash(cached):
    registry, datasets, _ = cached

    proc = run_cli("verify", str(datasets / "cifar-10-batches-py-target_archive"), "--registry", str(registry))

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ") and "sha256 ok" in proc.stdout


def test_verify_unhashed_and_unknown_files(cached, tmp_path):
    registry, datasets, files = cached

    fashion = run_cli("verify", "fashion_mnist", "--registry", str(registry))
    assert fashion.returncode == 0
    # Keras ships no hash for fashion-mnist; the registry has TFDS's sha256 (issue 11).
    assert fashion.stdout.count("sha256 ok") == 4 and "unchecked" not in fashion.stdout

    other = tmp_path / "notes.txt"
    other.write_bytes(b"abc")
    plain = run_cli("verify", str(other))
    assert plain.returncode == 0
    assert plain.stdout.strip() == f"unchecked {other}  no known hash; sha256 {SHA}"


def test_verify_missing_dataset_and_missing_path(home, tmp_path):
    missing = run_cli("verify", "mnist")
    assert missing.returncode == 1
    assert "missing" in missing.stdout and len(error_lines(missing.stderr)) == 1

    no_file = run_cli("verify", str(tmp_path / "nope.npz"))
    assert no_file.returncode == 2
    assert error_lines(no_file.stderr) == [f"prefetch: error: {tmp_path / 'nope.npz'}: no such file"]

    unknown = run_cli("verify", "cifar11")
    assert unknown.returncode == 2 and "cifar10" in unknown.stderr
