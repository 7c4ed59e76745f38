"""Bad input never gives a traceback: one clear `prefetch: error:` line and its exit code.

Everything here goes through the real CLI (a subprocess without a TTY), because "one
line on stderr" is a property of the whole program, not of a function.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from tests.origin import OriginServer

DATA = random.Random(61).randbytes(96 << 10)
SHA = hashlib.sha256(DATA).hexdigest()


def one_error_line(proc, code: int) -> str:
    """Assert exit ``code`` and exactly one ``prefetch: error:`` line on stderr; return it."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("prefetch: error: "), lines[0]
    assert proc.stdout.strip() == "", proc.stdout
    return lines[0]


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("d.bin", DATA)
        yield server


def write_registry(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- names and URLs


@pytest.mark.parametrize("typo, suggestion", [("mnsit", "mnist"), ("cifar-1O", "cifar10"), ("fashion_mnis", "fashion_mnist")])
def test_unknown_dataset_suggests_close_names(cli, typo, suggestion):
    line = one_error_line(cli("get", typo), ExitCode.USAGE)
    assert f"unknown dataset {typo!r}" in line
    assert "did you mean" in line and suggestion in line


@pytest.mark.parametrize("name", ["no-such-dataset-at-all", "数据集", ""])
def test_unknown_dataset_without_close_names(cli, name):
    line = one_error_line(cli("get", name), ExitCode.USAGE)
    assert "unknown dataset" in line and "prefetch list" in line


@pytest.mark.parametrize("url", [
    "http://",
    "https:///no-host.bin",
    "ftp://example.org/file.bin",
    "file://elsewhere/etc/passwd",  # (file:///path is a local origin since issue 21; a host is not)
    "http://127.0.0.1:99999/x.bin",
    "http://[::1/x.bin",
])
def test_malformed_url(cli, tmp_path, url):
    line = one_error_line(cli("get", url, "-o", str(tmp_path / "x.bin")), ExitCode.USAGE)
    assert "URL" in line
    assert not (tmp_path / "x.bin").exists()


@pytest.mark.parametrize("flag, value, expect", [
    ("--sha256", "xyz", "not hexadecimal"),
    ("--sha256", "abcd", "64 hex digits"),
    ("--sha256", SHA[:-1], "64 hex digits"),
    ("--md5", SHA, "32 hex digits"),
    ("--sha256", "sha1:" + "a" * 40, "unsupported hash algorithm"),
    ("--sha256", "", "--sha256 is empty (an unset shell variable?)"),  # `--sha256 "$SHA"` with SHA unset
    ("--md5", " ", "--md5 is empty"),
])
def test_malformed_hash(cli, origin, tmp_path, flag, value, expect):
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), flag, value),
                          ExitCode.USAGE)
    assert expect in line
    assert origin.requests == []  # rejected before any download


def test_a_bad_md5_beside_a_good_sha256_is_a_usage_error(cli, origin, tmp_path):
    """Both may be given (each is checked: tests/test_two_hashes.py); each is checked as given."""
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "--sha256", SHA,
                              "--md5", "0" * 31), ExitCode.USAGE)
    assert "md5 hash must be 32 hex digits" in line
    assert origin.requests == []


@pytest.mark.parametrize("n", ["0", "-1", "-16"])
def test_connections_zero_or_negative(cli, origin, tmp_path, n):
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "--connections", n),
                          ExitCode.USAGE)
    assert f"--connections must be 1 or more, got {n}" in line
    assert origin.requests == []


def test_timeout_not_a_number(cli, origin, tmp_path):
    """click's FloatRange(min=0, min_open=True) takes nan (nan <= 0 is False): it was
    reported as "invalid URL ...: Invalid value NaN", exit 3; as a tuning variable too."""
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "--timeout", "nan"),
                          ExitCode.USAGE)
    assert "--timeout" in line and "nan" in line
    env = dict(os.environ, PREFETCH_READ_TIMEOUT="nan")
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), env=env),
                          ExitCode.USAGE)
    assert "PREFETCH_READ_TIMEOUT" in line
    assert origin.requests == []


@pytest.mark.parametrize("seconds", ["inf", "1e300"])
def test_a_timeout_past_what_the_clock_holds_means_never(cli, origin, tmp_path, seconds):
    """``--timeout inf`` (or a number the platform's time_t cannot hold) was an internal
    error (OverflowError) for every file; it waits as long as the clock can say."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFETCH_READ_TIMEOUT", "PREFETCH_CONNECT_TIMEOUT")}
    proc = cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "--timeout", seconds, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d.bin").read_bytes() == DATA


def test_a_removed_current_directory(origin, home, tmp_path):
    """A shell (or notebook) whose directory was removed: a URL saved "here" is one line
    (exit 5), not an internal error with a crash report; with -P DIR it downloads."""
    import subprocess
    import sys

    gone = tmp_path / "gone"
    script = 'mkdir "$1" && cd "$1" && rmdir "$1" && shift && exec "$@"'
    base = ["sh", "-c", script, "sh", str(gone), sys.executable, "-m", "prefetch", "get", origin.url_for("d.bin")]
    run = dict(capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    line = one_error_line(subprocess.run(base + ["-q"], **run), ExitCode.FILESYSTEM)
    assert "current directory was removed" in line
    for extra in (["-P", str(tmp_path / "out")], ["-P", str(tmp_path / "out"), "-b"]):
        proc = subprocess.run(base + extra + ["-q"], **run)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "d.bin").read_bytes() == DATA


def test_bad_tuning_variable(cli, origin, tmp_path):
    env = dict(os.environ, PREFETCH_RETRIES="lots")
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), env=env),
                          ExitCode.USAGE)
    assert "PREFETCH_RETRIES" in line


# --------------------------------------------------------------------------- registry files


@pytest.mark.parametrize("body, expect", [
    ("[broken\nfiles = 1", "not valid TOML"),
    ('[x]\nfiles = "nope"', "needs at least one"),
    ('[x]\ncolour = "red"\n[[x.files]]\nurl = "http://127.0.0.1/x.bin"', "unknown key"),
    ('[[x.files]]\nurl = "ftp://127.0.0.1/x.bin"', "malformed URL"),
    ('[[x.files]]\nurl = "http://127.0.0.1/x.bin"\nsha256 = "zz"', "sha256"),
    ('[[x.files]]\nurl = "http://127.0.0.1/x.bin"\ntarget = "../../etc/x"', "must stay inside"),
    ('[[x.files]]\nurl = "http://127.0.0.1/x.bin"\nextract = ["/abs"]', "must stay inside"),
    ("x = 3", "expected a table"),
    ("\xff\xfe", "cannot read"),
])
def test_malformed_registry_file(cli, tmp_path, body, expect):
    path = tmp_path / "reg.toml"
    if body == "\xff\xfe":
        path.write_bytes(b"\xff\xfe\x00garbage")
    else:
        write_registry(path, body)
    line = one_error_line(cli("get", "x", "--registry", str(path)), ExitCode.USAGE)
    assert expect in line and str(path) in line


def test_missing_registry_file(cli, tmp_path):
    line = one_error_line(cli("get", "mnist", "--registry", str(tmp_path / "nope.toml")), ExitCode.USAGE)
    assert "does not exist" in line


def test_malformed_user_registry_in_config_dir(cli, home):
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    write_registry(config / "registry.toml", "[mnist\n")
    line = one_error_line(cli("get", "mnist"), ExitCode.USAGE)
    assert str(config / "registry.toml") in line


# --------------------------------------------------------------------------- mirrors.toml


@pytest.mark.parametrize("body, expect", [
    ("[datasets.team\nurl = 1", "not valid TOML"),
    ('[datasets.team]\nurl = "ftp://host/x/"', "team"),
    ('[datasets.team]\nurl = "http://127.0.0.1/d/"\ncolour = "red"', "colour"),
    ('[colours]\nred = 1', "unknown top-level key"),
    ('datasets = 3', "must be a table"),
])
def test_malformed_user_mirrors_toml(cli, home, body, expect):
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(body, encoding="utf-8")
    line = one_error_line(cli("get", "mnist", "--mirror", "team"), ExitCode.USAGE)
    assert expect in line and "mirrors.toml" in line


def test_unknown_mirror_name(cli, home):
    line = one_error_line(cli("get", "mnist", "--mirror", "nosuchmirror"), ExitCode.USAGE)
    assert "unknown dataset mirror 'nosuchmirror'" in line


def test_malformed_mirror_url(cli, home):
    line = one_error_line(cli("get", "mnist", "--mirror", "http://[bad/"), ExitCode.USAGE)
    assert "http://[bad/" in line


# --------------------------------------------------------------------------- state files


CORRUPT_STATES = {
    "garbage": b"\x00\x01 not json at all",
    "empty": b"",
    "truncated": b'{"version": 1, "urls": ["http://x"], "size": 983',
    "wrong types": json.dumps({"version": 1, "urls": "http://x", "size": "big", "done": "all"}).encode(),
    "done beyond size": None,  # filled in below: claims bytes that are not on disk
    "negative ranges": None,
    "future version": None,
    "list": b"[1, 2, 3]",
}


@pytest.mark.parametrize("kind", sorted(CORRUPT_STATES))
def test_corrupted_state_file_starts_over_and_still_gives_the_right_file(cli, origin, tmp_path, kind):
    out = tmp_path / "d.bin"
    url = origin.url_for("d.bin")
    part, state = Path(f"{out}.part"), Path(f"{out}.part.json")
    # A .part full of wrong bytes: trusting any of it would corrupt the result.
    part.write_bytes(b"\xaa" * len(DATA))
    body = CORRUPT_STATES[kind]
    if kind == "done beyond size":
        body = json.dumps({"version": 1, "urls": [url], "size": len(DATA), "done": [[0, len(DATA) * 2]]}).encode()
    elif kind == "negative ranges":
        body = json.dumps({"version": 1, "urls": [url], "size": len(DATA), "done": [[-50, 10]]}).encode()
    elif kind == "future version":
        body = json.dumps({"version": 99, "urls": [url], "size": len(DATA), "done": [[0, len(DATA)]]}).encode()
    state.write_bytes(body)
    proc = cli("get", url, "-o", str(out), "--sha256", SHA)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert out.read_bytes() == DATA
    assert not part.exists() and not state.exists()
    # Started over at once: not a resume from the bad state that only the hash check then undid.
    assert "resuming" not in proc.stderr and "mismatch" not in proc.stderr, proc.stderr


def test_state_claiming_more_than_the_part_holds_is_not_trusted(cli, origin, tmp_path):
    """A well-formed state whose .part was truncated (say, by a copy) must not be believed."""
    out = tmp_path / "d.bin"
    url = origin.url_for("d.bin")
    Path(f"{out}.part").write_bytes(DATA[:1000])
    # With the server's real ETag (without a validator a hash-less partial is dropped anyway).
    Path(f"{out}.part.json").write_text(json.dumps(
        {"version": 1, "urls": [url], "size": len(DATA), "ranges": True,
         "validators": {url: {"etag": origin.etag("d.bin")}}, "done": [[0, len(DATA)]]}))
    proc = cli("get", url, "-o", str(out), "-q")  # no hash: only the state logic protects us
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA


# --------------------------------------------------------------------------- job ids


@pytest.mark.parametrize("job", ["../../etc/passwd", "a/b", "..", "/tmp/x", "a b"])
def test_job_id_with_path_characters(cli, job):
    for command in ("status", "log", "cancel"):
        proc = cli(command, job)
        line = one_error_line(proc, ExitCode.USAGE)
        assert "invalid job id" in line


@pytest.mark.parametrize(
    "args",
    [
        ["get", "mnist", "--no-such-flag"],
        ["get"],  # no NAME
        ["get", "mnist", "--connections", "many"],
        ["no-such-command"],
    ],
)
def test_click_usage_errors_are_one_line_too(cli, tmp_path, args):
    proc = cli(*[a.format(tmp=tmp_path) for a in args])
    line = one_error_line(proc, ExitCode.USAGE)
    assert "--help" in line  # where to read more
    assert "Usage:" not in proc.stderr


def test_an_output_path_that_is_not_utf8(home, origin, tmp_path):
    """Linux names are bytes: ``-o`` into a directory named b'\\xff' (a surrogate-escaped argv)
    was an internal error (the per-file lock's key encoded the path as strict UTF-8)."""
    import subprocess
    import sys

    folder = os.fsencode(tmp_path) + b"/\xff"
    os.mkdir(folder)
    proc = subprocess.run([sys.executable, "-m", "prefetch", "get", origin.url_for("d.bin"), "-o", folder + b"/d.bin",
                           "-q"], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [b"downloaded", folder + b"/d.bin"]
    assert Path(os.fsdecode(folder), "d.bin").read_bytes() == DATA
    # -b: the launcher's first log line and the worker's log hold the path's bytes
    proc = subprocess.run([sys.executable, "-m", "prefetch", "get", origin.url_for("d.bin"), "-o", folder + b"/b.bin",
                           "-b"], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    for command in (["wait"], ["status"], ["log"]):
        proc = subprocess.run([sys.executable, "-m", "prefetch", *command], capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (command, proc.stderr)
    assert b"/b.bin" in proc.stdout and b" done exit=0" in proc.stdout  # (log shows it as text: U+FFFD)
    assert Path(os.fsdecode(folder), "b.bin").read_bytes() == DATA
