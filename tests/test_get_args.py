"""``prefetch get``'s command line read without click (``commands/get_args.py``): the same
parameters click reads, or None (click reads the line, with its own messages)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from prefetch.commands.get import get
from prefetch.commands.get_args import OPTIONS, parse_get


def click_params(args: list[str]) -> dict:
    ctx = get.make_context("get", list(args))
    return dict(ctx.params)


@pytest.fixture()
def paths(tmp_path):
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-file").write_text("x")
    return tmp_path


READ = [
    ["https://example.org/a.bin"],
    ["https://example.org/a.bin", "-o", "out.bin", "-q"],
    ["-q", "https://example.org/a.bin", "--output=out/", "-b"],
    ["cifar10", "mnist", "-b", "--json", "--no-nice"],
    ["cifar10", "--nice", "--no-nice", "--nice"],
    ["hf://Qwen/Qwen2.5-0.5B", "--include", "*.json", "--include=*.safetensors", "--exclude", "x", "--mirror",
     "hf-mirror", "--lfs-from", "ms://Qwen/Qwen2.5-0.5B"],
    ["u", "--connections", "16", "--host-connections", "2", "--retries", "0", "--timeout", "2.5"],
    ["u", "--timeout", "inf", "--connections", " 7 ", "--connections=8"],
    ["u", "--sha256", "ab" * 32, "--md5", "cd" * 16, "--header", "A: b", "--header", "C: d", "--limit-rate", "2M"],
    ["-i", "list.txt", "-P", "{dir}", "--extract", "--extract-to", "new-dir", "--fail-fast", "--force"],
    ["u", "--print-paths", "-0", "--torch-hub", "--also-origin", "--seed", "s3://b/p", "--root", "{dir}"],
    ["u", "--cache-dir", "{missing}", "--registry", "{file}", "--registry", "{missing}", "-o", "{file}"],
    ["", "u", "--output", ""],
]
LEFT_TO_CLICK = [
    [], ["--help"], ["-h"], ["u", "-bq"], ["u", "-oout.bin"], ["u", "--", "-x"], ["-"], ["u", "-o"],
    ["u", "-o", "-x"], ["u", "--bogus"], ["u", "--outpu", "x"], ["u", "--quiet=yes"], ["u", "--connections", "x"],
    ["u", "--host-connections", "0"], ["u", "--retries", "-1"], ["u", "--timeout", "0"], ["u", "--timeout", "-1e9"],
    ["u", "-P", "{file}"], ["u", "--registry", "{dir}"], ["u", "--cache-dir", "{file}"], ["u", "-o", "a\0b"],
    ["u", "--print-paths", "-b"], ["u", "-0", "--json"], ["-q"], ["u", "-5"],
]


def fill(args: list[str], paths) -> list[str]:
    return [a.format(dir=paths / "a-dir", file=paths / "a-file", missing=paths / "missing") for a in args]


@pytest.mark.parametrize("args", READ)
def test_a_plain_line_is_read_as_click_reads_it(args, paths):
    args = fill(args, paths)
    params = parse_get(args)
    assert params is not None
    assert params == click_params(args)


@pytest.mark.parametrize("args", LEFT_TO_CLICK)
def test_any_other_line_is_left_to_click(args, paths, monkeypatch):
    assert parse_get(fill(args, paths)) is None


def test_an_unreadable_path_is_left_to_click():
    """A directory the user may not read: click refuses it, so parse_get leaves the line to
    click. Root reads everything, so as root the check runs in a forked child as uid 65534
    (a real second user), in a directory that user can reach."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="get-args-", dir="/var/tmp"))
    try:
        top.chmod(0o755)
        locked = top / "locked"
        locked.mkdir(mode=0)
        args = ["u", "-P", str(locked)]

        def check() -> bool:
            import click

            try:
                click_params(args)
            except click.BadParameter:
                return parse_get(args) is None
            return False  # click read it: the user can read the directory

        if os.geteuid() != 0:
            assert check()
            return
        pid = os.fork()
        if pid == 0:  # the child: drop root, check, report by exit status
            code = 1
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                code = 0 if check() else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_shell_completion_is_left_to_click(monkeypatch):
    monkeypatch.setenv("_PREFETCH_COMPLETE", "bash_complete")
    assert parse_get(["u"]) is None


def test_the_click_command_is_made_from_the_same_declarations():
    options = {p.name: p for p in get.params if p.name != "names"}
    assert list(options) == [o[1] for o in OPTIONS]
    for decls, param, kind, multiple, _metavar, help_text in OPTIONS:
        option = options[param]
        assert option.multiple == multiple and option.help == help_text
        assert option.opts + option.secondary_opts == [d for decl in decls for d in decl.split("/")]
