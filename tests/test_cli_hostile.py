"""A hostile review of every command's input (tools/hostile_cli/ runs the whole sweep): what it
found, kept as tests, and a broad sample of what held.

Pasted values (a trailing ``\\r``, zero-width and bidi characters, escape bytes), a password in a
URL, 100 KB values, ``~user`` naming no user, undecodable bytes, names longer than the
filesystem allows: one ``prefetch: error:`` line that shows what was given, never a password
and never an internal error. In-process through ``prefetch.cli.main`` (the same ``_fail`` a
process runs); a subprocess where the process matters (argv bytes, a hang, closed streams).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from prefetch.errors import ExitCode


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """``prefetch ARGS`` in this process: (exit code, stdout, stderr)."""
    from prefetch.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def one_line(code: int, err: str, expect: int) -> str:
    """The one error line of a run that exited ``expect``."""
    assert code == expect, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("prefetch: error: "), err
    assert "internal error" not in err and "Traceback" not in err, err
    return lines[0]


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- what a message quotes


@pytest.mark.parametrize("name, shown", [
    ("mnist\u200b", "mnist\\u200b"),  # zero-width space: looked like 'mnist'
    ("\u202emnist", "\\u202emnist"),  # right-to-left override: turned the rest of the line around
    ("mni\rst", "mni\\rst"),  # a carriage return: the terminal wrote 'st' over the line's start
    ("x\x1b[2Jy", "x\\x1b[2Jy"),  # an escape sequence: cleared the screen
    ("a\u2028b", "a\\u2028b"),  # a line separator: split the line (str.splitlines)
    ("caf\u00e9\U0001F600", "caf\u00e9\U0001F600"),  # printable non-ASCII stays as it is
])
@pytest.mark.parametrize("command", [["list"], ["get", "mnist", "--registry"], ["verify"]])
def test_an_invisible_or_line_breaking_character_is_shown_escaped(home, capsys, name, shown, command):
    """Messages that quote the value as given (not its repr) showed these as they are."""
    code, _out, err = run_main(capsys, *command, name)
    line = one_line(code, err, ExitCode.USAGE)
    assert shown in line
    assert "\r" not in err and "\x1b" not in err and "\u200b" not in err and "\u202e" not in err


@pytest.mark.parametrize("args", [
    ["rm", "http://alice:s3cr3t@example.invalid/x.bin"],
    ["verify", "s3://alice:s3cr3t@bucket/key"],
    ["wait", "hf://alice:s3cr3t@org/name"],
    ["mirror", "bench", "http://alice:s3cr3t@example.invalid/"],
    ["get", "http://127.0.0.1:9/x.bin", "--seed", "http://alice:s3cr3t@example.invalid/x"],
])
def test_a_password_in_a_url_is_never_printed_back(home, capsys, args):
    code, out, err = run_main(capsys, *args)
    line = one_line(code, err, ExitCode.USAGE)
    assert "s3cr3t" not in out + err
    assert "alice:***@" in line


def test_a_password_in_a_url_that_is_refused_is_in_no_note_and_no_error(cli, tmp_path):
    """The connection's failure named its host as the URL's netloc, ``user:password@`` and all."""
    port = refused_port()
    done = cli("get", f"http://alice:s3cr3t@127.0.0.1:{port}/x.bin", "-o", str(tmp_path / "x.bin"), "--retries", "1")
    assert done.returncode == ExitCode.NETWORK, done.stderr
    assert f"127.0.0.1:{port}: Connection refused" in done.stderr
    assert "s3cr3t" not in done.stderr + done.stdout


def test_a_100_kb_value_is_one_short_line(home, capsys):
    code, _out, err = run_main(capsys, "rm", "a" * 100_000)
    line = one_line(code, err, ExitCode.USAGE)
    assert len(line) < 600 and "(100002 characters)" in line  # (the quotes around it included)
