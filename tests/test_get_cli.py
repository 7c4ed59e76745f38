"""`prefetch get` as a notebook `!` cell runs it: a subprocess without a TTY."""

from __future__ import annotations

import json
import os
import random

import pytest

from prefetch.ui.render import EVENT_LINE, PROGRESS_LINE
from tests import datasets_synth
from tests.conftest import run_cli

MiB = 1 << 20
KiB = 1 << 10


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def assert_plain(text: str) -> None:
    assert "\r" not in text
    assert "\x1b[" not in text


def test_non_tty_output_is_plain_lines_with_parsable_progress(origin, home, tmp_path):
    data = random.Random(1).randbytes(2 * MiB)
    origin.put("data.bin", data)
    origin.rate = 768 * KiB  # per connection: about 1.3 s, long enough for several progress lines
    out = tmp_path / "data.bin"

    proc = run_cli("get", origin.url_for("data.bin"), "-o", str(out), "--connections", "2")

    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert_plain(proc.stdout)
    assert_plain(proc.stderr)
    lines = proc.stderr.splitlines()
    assert lines and all(EVENT_LINE.match(line) for line in lines), lines
    progress = [line for line in lines if " progress " in line]
    assert len(progress) >= 2, lines
    for line in progress:
        match = PROGRESS_LINE.match(line)
        assert match, line
        assert match["file"] == "data.bin" and match["total"] == "2.0MiB"  # human units; --json has bytes
    percents = [float(PROGRESS_LINE.match(line)["percent"]) for line in progress]
    assert percents == sorted(percents) and all(p > 0 for p in percents)  # no "0/?" lines
    # The start line gives the size the server sent (the probe answers after the start event).
    assert any(line.endswith(" data.bin start 2.0MiB") for line in lines), lines
    # Rate limited: at most one line per 10% (or per 5 s) per file, plus the first.
    assert len(progress) <= 11
    assert proc.stdout.splitlines() == [f"downloaded {out}"]


def test_non_tty_dataset_run_with_extraction_is_plain(origin, home, tmp_path):
    files = datasets_synth.build_files()
    datasets_synth.serve_files(origin, files)
    registry = datasets_synth.write_registry(tmp_path / "synth.toml", origin.url, files, names=["cifar10"])

    proc = run_cli("get", "cifar10", "--registry", str(registry))

    assert proc.returncode == 0, proc.stderr
    assert_plain(proc.stdout)
    assert_plain(proc.stderr)
    assert all(EVENT_LINE.match(line) for line in proc.stderr.splitlines()), proc.stderr
    assert " cifar-10-python.tar.gz extract extracting into " in proc.stderr
    assert " cifar-10-python.tar.gz verify sha256 ok" in proc.stderr
    base = home / ".keras" / "datasets"
    assert proc.stdout.splitlines() == [
        f"downloaded {base / 'cifar-10-batches-py.tar.gz'}",
        f"{'':10} {base / 'cifar-10-batches-py-target_archive'}",
        f"{'extracted':10} {base / 'cifar-10-batches-py'}",
        f"{'extracted':10} {base / 'cifar-10-batches-py-target' / 'cifar-10-batches-py'}",
    ]

    again = run_cli("get", "cifar10", "--registry", str(registry))
    assert again.returncode == 0, again.stderr
    assert "already complete" in again.stderr
    assert again.stdout.splitlines()[0] == f"cached     {base / 'cifar-10-batches-py.tar.gz'}"
    assert len(origin.data_requests("cifar-10-python.tar.gz")) == 1  # nothing downloaded twice


def test_failure_is_one_plain_error_line(origin, home, tmp_path):
    proc = run_cli("get", origin.url_for("nope.bin"), "-o", str(tmp_path / "nope.bin"))

    assert proc.returncode == 3
    assert_plain(proc.stderr)
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and "404" in errors[0]
    assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # no empty .part left behind


def test_json_and_quiet(origin, home, tmp_path):
    data = b"x" * 5000
    origin.put("a.bin", data)
    out = tmp_path / "a.bin"

    proc = run_cli("get", origin.url_for("a.bin"), "-o", str(out), "--json")

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    [result] = json.loads(proc.stdout)
    assert result["status"] == "downloaded" and result["path"] == str(out) and result["size"] == len(data)

    quiet = run_cli("get", origin.url_for("a.bin"), "-o", str(out), "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.stdout.startswith("cached")


def test_url_without_output_lands_in_the_current_directory(origin, home, tmp_path):
    origin.put("plain.bin", b"hello")
    work = tmp_path / "work"
    work.mkdir()

    proc = run_cli("get", origin.url_for("plain.bin"), cwd=work)

    assert proc.returncode == 0, proc.stderr
    assert (work / "plain.bin").read_bytes() == b"hello"
    assert sorted(p.name for p in work.iterdir()) == ["plain.bin"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sha256", "xyz"], "not hexadecimal"),
        (["--sha256", "ab" * 16], "sha256 hash must be 64 hex digits"),
        (["--md5", "ab" * 32], "md5 hash must be 32 hex digits"),
        (["--sha256", "ab" * 32, "--md5", "ab" * 32], "md5 hash must be 32 hex digits"),  # (both may be given)
        (["--connections", "0"], "--connections must be 1 or more"),
    ],
)
def test_usage_errors_exit_2_with_one_line(origin, home, tmp_path, args, message):
    origin.put("a.bin", b"data")

    proc = run_cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), *args)

    assert proc.returncode == 2
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert origin.requests == []  # refused before any network traffic
    assert not (tmp_path / "a.bin").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mnist", "--sha256", "ab" * 32], "apply to a single URL"),
        (["ftp://example.org/x.bin"], "malformed URL"),
        (["http://"], "malformed URL"),
    ],
)
def test_bad_targets_exit_2(home, args, message):
    proc = run_cli("get", *args)

    assert proc.returncode == 2
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and message in errors[0], proc.stderr


def test_dataset_mirror_from_the_environment(origin, silent_origin, home, tmp_path):
    """PREFETCH_DATASET_MIRROR is the default --mirror."""
    files = datasets_synth.build_files()
    datasets_synth.serve_files(origin, files)
    registry = datasets_synth.write_registry(tmp_path / "synth.toml", silent_origin.url, files, names=["mnist"])
    env = os.environ.copy()
    env["PREFETCH_DATASET_MIRROR"] = origin.url

    proc = run_cli("get", "mnist", "--registry", str(registry), env=env)

    assert proc.returncode == 0, proc.stderr
    assert (home / ".keras" / "datasets" / "mnist.npz").read_bytes() == files["mnist.npz"]
    assert silent_origin.connections == 0
