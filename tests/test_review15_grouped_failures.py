"""Failure lines grouped "the same way" (commands/get_run.py ``_same_way``, fourteenth sitting).

Errors that differ only by their file's path or name are grouped; the name was blanked wherever
its text appeared in the error. A name that is also part of the cause or the host (numbered
files: ``.../files/0`` .. ``/5``, whose ``0`` is in ``127.0.0.1`` and in ``403``; a file named
``404``) broke that both ways: six files failing alike were six lines, and files named 403, 404, 405,
410 and 451 failing four different ways were one group, the 451 counted as failing "the same
way" as a 403. A name is now blanked only where it stands as the file's name (after a ``/``, a
quote or at the start, and not followed by more of a name). A real nginx answers."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer

CODES = (403, 404, 405, 410, 451)


@pytest.fixture
def nginx(tmp_path):
    root = tmp_path / "www"
    (root / "forbidden").mkdir(parents=True)
    location = "location /forbidden/ { return 403; }\n" + "\n".join(
        f"location = /codes/{code} {{ return {code}; }}" for code in CODES)
    with NginxServer(root, location=location) as server:
        yield server


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def test_numbered_files_failing_alike_are_one_group(nginx, home, tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{nginx.url_for(f'forbidden/{i}')}\n" for i in range(6)))
    got = run_cli("get", "-i", str(listing), "-P", str(tmp_path / "out"), "--retries", "0", cwd=tmp_path)
    assert got.returncode == 3, got.stderr
    errors = _errors(got.stderr)
    assert len(errors) == 4, got.stderr  # (three named, then one line for the rest)
    assert "3 more files failed the same way (3, 4, 5)" in errors[-1], errors


def test_files_named_like_status_codes_failing_differently_are_not_one_group(nginx, home, tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{nginx.url_for(f'codes/{code}')}\n" for code in CODES))
    got = run_cli("get", "-i", str(listing), "-P", str(tmp_path / "out"), "--retries", "0", cwd=tmp_path)
    assert got.returncode == 3, got.stderr
    errors = _errors(got.stderr)
    assert not any("the same way" in line for line in errors), errors
    for code in CODES:
        assert any(f"answered HTTP {code}" in line for line in errors), (code, errors)


def test_a_files_error_that_ends_another_files_is_still_said(home, tmp_path):
    """An error is left out when a longer one quotes it (an hf:// repo's summary quotes its first
    file's). Files train.csv and pretrain.csv (or 1 and 11) from a host that refuses connections
    fail with 'NAME: 127.0.0.1:PORT: Connection refused; ...': pretrain.csv's error holds
    train.csv's whole, so train.csv's failure was in no line and counted in none (four files
    failed, three lines). A quote now starts where a name cannot go on (a space, a quote, the
    start), not inside another name."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # (nothing listens: refused)
    names = ["d/1", "d/11", "e/train.csv", "e/pretrain.csv"]
    got = run_cli("get", *(f"http://127.0.0.1:{port}/{n}" for n in names), "-P", str(tmp_path / "out"),
                  "--retries", "0", "--timeout", "3", cwd=tmp_path)
    assert got.returncode == 3, got.stderr
    errors = _errors(got.stderr)
    for name in ("1", "11", "train.csv", "pretrain.csv"):
        assert any(line.startswith(f"prefetch: error: {name}: ") for line in errors), (name, errors)
    assert len(errors) == 4, errors
