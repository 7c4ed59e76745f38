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


def test_waits_failures_are_one_line_too(home, capsys):
    """``wait`` prints its failures itself (not through the last resort): a pasted CRLF split it in three."""
    code, _out, err = run_main(capsys, "wait", "mnist\r\n")
    line = one_line(code, err, ExitCode.FAILURE)
    assert line.startswith("prefetch: error: mnist\\r : not in place")


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


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize("args", [
    ["get", "http://127.0.0.1:9/x.bin", "-P", "~nosuchuser/x"],
    ["get", "http://127.0.0.1:9/x.bin", "--extract", "--extract-to", "~nosuchuser/x"],
    ["get", "-i", "LIST:http://127.0.0.1:9/x.bin out=~nosuchuser/y"],
    ["get", "-i", "LIST:http://127.0.0.1:9/x.bin dir=~nosuchuser/y"],
    ["export", "~nosuchuser/x"],
])
def test_a_tilde_naming_no_user_is_a_usage_error(home, capsys, tmp_path, monkeypatch, args):
    """``Path.expanduser`` raised RuntimeError (an internal error); ``out=`` kept ``~nosuchuser`` as a
    folder of that name."""
    if args[1] == "-i":
        listing = tmp_path / "list.txt"
        listing.write_text(args[2][len("LIST:"):] + "\n")
        args = [args[0], "-i", str(listing)]
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_main(capsys, *args)
    line = one_line(code, err, ExitCode.USAGE)
    assert "there is no user 'nosuchuser'" in line
    assert not (tmp_path / "~nosuchuser").exists()


def test_a_cache_dir_that_is_not_utf8_is_listed(home, tmp_path):
    """A folder name of bytes that are not UTF-8 (surrogates in Python) was an internal error
    (UnicodeEncodeError) in the completion record's name, then in writing it to a strict UTF-8
    stdout (en_US.UTF-8's; PYTHONIOENCODING=utf-8:strict here, where only C locales exist)."""
    folder = os.fsencode(str(tmp_path)) + b"/\xff\xfe"
    done = subprocess.run([sys.executable, "-m", "prefetch", "list", "--cache-dir", folder], capture_output=True,
                          timeout=60, stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONIOENCODING="utf-8:strict"))
    assert done.returncode == 0, done.stderr
    assert b"Keras cache: " + folder + b"/datasets\n" in done.stdout and b"mnist" in done.stdout


@pytest.mark.parametrize("args", [["clean", "--cache-dir", "a" * 3000], ["clean", "--root", "a" * 3000],
                                  ["export", "out", "--cache-dir", "a" * 3000]])
def test_a_name_longer_than_the_filesystem_allows_is_a_usage_error(home, capsys, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_main(capsys, *args)
    line = one_line(code, err, ExitCode.USAGE)
    assert "File name too long" in line and len(line) < 600


@pytest.mark.parametrize("command", [["mirror", "bench"], ["doctor"], ["mirror", "use", "--dry-run", "fastest"]])
def test_a_deadline_past_what_a_wait_holds_is_a_usage_error(home, capsys, command):
    """``--deadline 1e23`` passed the finite check and overflowed a queue's wait (internal error)."""
    code, _out, err = run_main(capsys, *command, "--deadline", "1e23")
    assert "0.1<=x<=86400" in one_line(code, err, ExitCode.USAGE)


@pytest.mark.parametrize("kwargs", [{"path": "~nosuchuser/x"}, {"extract": True, "extract_to": "~nosuchuser/x"}])
def test_the_python_fetch_refuses_a_tilde_naming_no_user_with_one_usage_error(home, tmp_path, kwargs):
    import prefetch
    from prefetch.errors import UsageError

    kwargs.setdefault("path", str(tmp_path))
    with pytest.raises(UsageError, match="there is no user 'nosuchuser'"):
        prefetch.fetch("http://127.0.0.1:9/x.tar.gz", **kwargs)


# --------------------------------------------------------------------------- -i FILE


def run_list(*args: str, stdin=subprocess.DEVNULL, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prefetch", "get", *args], stdin=stdin, capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


@pytest.mark.parametrize("path, why", [("/dev/zero", "it is a device"), ("/", "Is a directory")])
def test_an_input_file_that_is_a_device_or_a_directory_is_refused_at_once(home, path, why):
    """``-i /dev/zero`` read forever (the whole machine's memory)."""
    done = run_list("-i", path)
    assert why in one_line(done.returncode, done.stderr, ExitCode.USAGE)


def test_an_input_file_on_a_closed_stdin_is_a_usage_error(home):
    done = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", sys.executable, "-m", "prefetch", "get", "-i", "-"],
                          capture_output=True, text=True, timeout=30, env=os.environ.copy())
    assert "no standard input" in one_line(done.returncode, done.stderr, ExitCode.USAGE)


def test_an_input_file_past_the_limit_is_refused(home, capsys, tmp_path, monkeypatch):
    from prefetch.commands import get_run

    monkeypatch.setattr(get_run, "INPUT_LIMIT", 1000)
    listing = tmp_path / "list.txt"
    listing.write_text("http://127.0.0.1:9/x.bin\n" * 100)
    code, _out, err = run_main(capsys, "get", "-i", str(listing))
    assert "more than" in one_line(code, err, ExitCode.USAGE)


@pytest.mark.parametrize("bad", ["\x00", "\x07", "\x7f"])
def test_a_control_character_in_a_listed_url_is_a_usage_error(home, capsys, tmp_path, bad):
    """A NUL was an internal error of that file (ValueError: embedded null byte)."""
    listing = tmp_path / "list.txt"
    listing.write_text(f"http://127.0.0.1:9/x{bad}.bin\n")
    code, _out, err = run_main(capsys, "get", "-i", str(listing), "-P", str(tmp_path))
    assert f"it contains the control character {bad!r}" in one_line(code, err, ExitCode.USAGE)


def test_an_input_file_from_a_pipe_with_a_byte_order_mark(home, origin, tmp_path):
    origin.put("d.bin", b"d" * 1000)
    done = subprocess.run([sys.executable, "-m", "prefetch", "get", "-i", "-", "-P", str(tmp_path), "-q"],
                          input=("\ufeff" + origin.url_for("d.bin") + "\r\n").encode(), capture_output=True,
                          timeout=60, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "d.bin").read_bytes() == b"d" * 1000


# --------------------------------------------------------------------------- FIFOs where a config is read


def test_fifos_at_pip_uv_and_conda_configs_never_block_mirror_show(home):
    """pip (run by ``mirror show`` and ``doctor``), the uv and conda readers opened them blocking:
    the command never ended (and the ``pip config list`` child outlived it)."""
    for path in (home / ".config" / "pip" / "pip.conf", home / ".config" / "uv" / "uv.toml", home / ".condarc"):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
    done = subprocess.run([sys.executable, "-m", "prefetch", "mirror", "show"], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert "pip would wait forever on its config" in rows["pip"]
    assert "uv.toml unreadable: not a regular file" in rows["uv"]
    assert ".condarc (not read: not a regular file)" in rows["conda"]


def test_a_fifo_at_the_netrc_is_refused_not_waited_on(cli, home, origin, tmp_path):
    origin.put("d.bin", b"d" * 1000)
    os.mkfifo(home / ".netrc")
    done = cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), timeout=60)
    line = one_line(done.returncode, done.stderr, ExitCode.FILESYSTEM)
    assert f"refusing to use {home / '.netrc'}: it is a FIFO" in line
    assert not (tmp_path / "d.bin").exists()


# --------------------------------------------------------------------------- closed streams


def test_print_paths_into_a_closed_stdout_drops_them_as_every_command_does(home, origin, tmp_path):
    """``>&-``: ``sys.stdout`` is None; the path printer wrote to it (internal error, exit 1)."""
    origin.put("d.bin", b"d" * 1000)
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "prefetch", "get",
                           origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "--print-paths"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    assert (tmp_path / "d.bin").read_bytes() == b"d" * 1000


# --------------------------------------------------------------------------- the environment


@pytest.mark.parametrize("variable, value, expect", [
    ("PREFETCH_DEMOTE_WINDOW", "0", "must be more than 0"),  # a division by it: internal error
    ("PREFETCH_DEMOTE_WINDOW", "-5", "must be more than 0"),
    ("PREFETCH_CONNECT_TIMEOUT", "-5", "must be more than 0"),  # exit 3, "invalid URL ...: Timeout value out of range"
    ("PREFETCH_CONNECT_TIMEOUT", "0", "must be more than 0"),  # exit 3, a non-blocking socket's EINPROGRESS
    ("PREFETCH_READ_TIMEOUT", "-1", "must be more than 0"),
    ("PREFETCH_BACKOFF", "-1", "must be 0 or more"),
])
def test_a_tuning_variable_out_of_its_range_is_a_usage_error(cli, origin, tmp_path, variable, value, expect):
    origin.put("d.bin", b"d" * 1000)
    done = cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"),
               env=dict(os.environ, **{variable: value}))
    assert f"{variable}='{value}': {expect}" in one_line(done.returncode, done.stderr, ExitCode.USAGE)
    assert not (tmp_path / "d.bin").exists()


def test_a_failed_files_error_is_one_line_too(cli, tmp_path):
    """The per-file errors a get prints at its end did not go through the one-line rule."""
    done = cli("get", f"https://127.0.0.1:{refused_port()}/x.bin", "-o", str(tmp_path / "x.bin"),
               env=dict(os.environ, REQUESTS_CA_BUNDLE="a\nb\x1b[2J"))
    line = one_line(done.returncode, done.stderr, ExitCode.NETWORK)
    assert "cannot use the CA bundle a b\\x1b[2J named by REQUESTS_CA_BUNDLE" in line


def test_a_pip_config_path_that_is_not_utf8_is_shown(home):
    """pip's answer quoting the path was decoded strictly (UnicodeDecodeError: internal error)."""
    done = subprocess.run([sys.executable, "-m", "prefetch", "mirror", "show"], capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=dict(os.environ, PIP_CONFIG_FILE=os.fsdecode(b"/tmp/\xff\xfe")))
    assert done.returncode == 0, done.stderr
    assert b"internal error" not in done.stderr


@pytest.mark.parametrize("args", [["mirror", "show"], ["mirror", "show", "--json"],
                                  ["doctor", "--no-sources", "--deadline", "0.5"],
                                  ["doctor", "--no-sources", "--deadline", "0.5", "--json"]])
def test_mirror_show_and_doctor_never_print_an_index_password(home, args):
    """A private index's token in PIP_INDEX_URL / UV_INDEX_URL / HF_ENDPOINT was printed whole, in a
    notebook's saved output."""
    secret = "https://alice:s3cr3t@pypi.example.invalid/simple"
    env = dict(os.environ, PIP_INDEX_URL=secret, UV_INDEX_URL=secret, HF_ENDPOINT="https://alice:s3cr3t@hf.example.invalid")
    done = subprocess.run([sys.executable, "-m", "prefetch", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, env=env)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert "s3cr3t" not in done.stdout + done.stderr
    assert "alice:***@pypi.example.invalid" in done.stdout


# --------------------------------------------------------------------------- the Python API


@pytest.mark.parametrize("call", [
    lambda prefetch: prefetch.ensure("http://127.0.0.1:9/x.bin", on_event=5),  # TypeError at the first event
    lambda prefetch: prefetch.ensure("http://127.0.0.1:9/x.bin", on_event="print"),
    lambda prefetch: prefetch.fetch("http://127.0.0.1:9/x.bin", fname=5),  # TypeError from os.fspath
    lambda prefetch: prefetch.fetch("http://127.0.0.1:9/x.bin", fname=b"x.bin"),
    lambda prefetch: prefetch.fetch("http://127.0.0.1:9/x.bin", fname={"x.bin"}),
], ids=["on_event-int", "on_event-str", "fname-int", "fname-bytes", "fname-set"])
def test_the_api_refuses_a_wrong_type_with_one_usage_error_before_anything_starts(home, call):
    import prefetch
    from prefetch.errors import UsageError

    with pytest.raises(UsageError, match="must be a"):
        call(prefetch)
