"""docs/ is the reference: what the code has, the pages say, and what the pages name, the code has.

* every command, sub-command and option of the CLI (as click declares them, so as
  ``--help`` shows them) is on its command's page;
* every exit code of ``prefetch/errors.py`` is a row of docs/exit-codes.md and of the
  README's table, with no row for a code that does not exist; the error classes the pages
  name are importable from ``prefetch`` with the exit codes the pages give them;
* every ``PREFETCH_*`` variable the code reads is named in the docs (but the few that only
  prefetch sets for itself);
* docs/architecture.md names every module of every layer in that layer's paragraph, and
  every module it names there exists;
* every ``prefetch/...``, ``tests/...`` or ``bench/...`` path the pages quote exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = ROOT / "prefetch"

# Each command's page (docs/commands/); `get`'s options may be on the page of the names they serve.
PAGES = {
    "get": ["get.md", "hf.md", "torchvision.md", "modelscope.md", "nltk.md"],
    "list": ["cache.md"], "verify": ["cache.md"], "rm": ["cache.md"], "clean": ["cache.md"],
    "status": ["jobs.md"], "log": ["jobs.md"], "wait": ["jobs.md"], "cancel": ["jobs.md"],
    "resume": ["jobs.md"], "jobs": ["jobs.md"],
    "mirror": ["mirrors.md"], "doctor": ["mirrors.md"],
    "push": ["store.md"], "export": ["store.md"],
    "demo": ["demo.md"],
}
# Set by prefetch for its own processes (a worker, click's completion, the test hooks), never by a user.
INTERNAL_ENV = {"PREFETCH_JOB_HEADERS", "PREFETCH_JOB_URLS", "PREFETCH_WORKER_DIR", "PREFETCH_COMPLETE",
                "PREFETCH_TEST_PAUSE_AT", "PREFETCH_TEST_PAUSE_SECONDS", "PREFETCH_TEST_PAUSE_START"}
REFERENCE = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if p.name != "speed-log.md")]


def _text(*pages: str) -> str:
    return "\n".join((DOCS / "commands" / p).read_text(encoding="utf-8") for p in pages)


def cli_commands():
    """(full name, click command) for every command and sub-command, as ``--help`` lists them."""
    from prefetch.commands.group import cli

    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        yield name, command
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                yield f"{name} {sub}", command.get_command(ctx, sub)


def missing_on_pages(pages: dict[str, list[str]]) -> list[str]:
    missing = []
    for full, command in cli_commands():
        top = full.split()[0]
        if top not in pages:
            missing.append(f"prefetch {top}: no page (add it to PAGES and to docs/commands/)")
            continue
        text = _text(*pages[top])
        if f"prefetch {full}" not in text and f"`{full}" not in text:
            missing.append(f"prefetch {full}: not on {pages[top]}")
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for spelling in param.opts + param.secondary_opts:
                if not re.search(re.escape(spelling) + r"(?![\w-])", text):
                    missing.append(f"prefetch {full} {spelling}: not on {pages[top]}")
    return missing


def test_every_command_and_option_is_on_its_page():
    missing = missing_on_pages(PAGES)
    assert not missing, "in --help but not in docs/commands/:\n" + "\n".join(missing)


def test_every_command_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p for ps in PAGES.values() for p in ps}
    assert {p.name for p in (DOCS / "commands").glob("*.md")} == pages
    assert all(f"commands/{p}" in nav for p in pages)


def test_option_check_sees_a_missing_option():
    """The check above would pass vacuously if it stopped reading the pages or the commands."""
    assert len(list(cli_commands())) > 20
    missing = missing_on_pages({**PAGES, "wait": ["demo.md"]})
    assert "prefetch wait --timeout: not on ['demo.md']" in missing
    assert "prefetch wait: not on ['demo.md']" in missing


def _table_codes(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\| (\d+) \|", text, re.M)]


def test_exit_codes_page_has_every_exit_code():
    from prefetch.errors import ExitCode

    codes = sorted(int(c) for c in ExitCode)
    page = (DOCS / "exit-codes.md").read_text(encoding="utf-8")
    assert _table_codes(page) == codes, "docs/exit-codes.md's table is not prefetch/errors.py's ExitCode"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert _table_codes(readme) == codes, "README.md's exit code table is not prefetch/errors.py's ExitCode"


def test_every_error_class_is_in_the_exit_codes_table():
    """exit-codes.md's table of classes is prefetch.errors', with each class's base and code."""
    import inspect

    import prefetch.errors as errors

    page = (DOCS / "exit-codes.md").read_text(encoding="utf-8")
    rows = {m[0]: (m[1], int(m[2])) for m in re.findall(r"^\| `(\w+)` \| `(\w+)` \| (\d) \|", page, re.M)}
    classes = {name: cls for name, cls in inspect.getmembers(errors, inspect.isclass)
               if issubclass(cls, errors.PrefetchError)}
    assert sorted(rows) == sorted(classes), "exit-codes.md's table of error classes is not prefetch.errors'"
    for name, cls in classes.items():
        assert rows[name] == (cls.__mro__[1].__name__, int(cls.exit_code)), (name, rows[name])


def test_error_classes_the_docs_name_have_their_codes():
    import prefetch
    from prefetch.errors import PrefetchError

    page = (DOCS / "exit-codes.md").read_text(encoding="utf-8")
    pairs = re.findall(r"`([A-Z][A-Za-z]+Error)` (\d)", page)
    assert len(pairs) >= 6, "exit-codes.md names each error class with its code: `UsageError` 2, ..."
    for name, code in pairs:
        cls = getattr(prefetch, name, None)
        assert cls is not None, f"docs/exit-codes.md names prefetch.{name}, which does not exist"
        assert issubclass(cls, PrefetchError) and int(cls.exit_code) == int(code), (name, cls.exit_code, code)

    api = (DOCS / "python-api.md").read_text(encoding="utf-8")
    listed = re.search(r"The error classes are importable from `prefetch`\s*\n?\(([^)]*)\)", api)
    assert listed, "python-api.md lists the error classes importable from prefetch"
    names = re.findall(r"`([A-Za-z]+)`", listed.group(1))
    assert "ExitCode" in names and len(names) >= 10
    for name in names:
        assert hasattr(prefetch, name), f"python-api.md says prefetch.{name} is importable; it is not"
    exported = {n for n in getattr(prefetch, "__all__", ()) if n.endswith("Error")}
    assert exported <= set(names), f"importable from prefetch, not in python-api.md: {sorted(exported - set(names))}"


def test_every_environment_variable_is_documented():
    read = set()
    for path in PACKAGE.rglob("*.py"):
        read |= set(re.findall(r"PREFETCH_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    docs = set()
    for page in REFERENCE:
        docs |= set(re.findall(r"PREFETCH_[A-Z0-9_]+", page.read_text(encoding="utf-8")))
    assert not (read - INTERNAL_ENV) - docs, f"read by prefetch, named nowhere in docs/: {sorted(read - INTERNAL_ENV - docs)}"
    assert not docs - read, f"named in docs/, read nowhere in prefetch/: {sorted(docs - read)}"


def _layer_paragraphs() -> dict[str, str]:
    """``layer -> its paragraphs`` of architecture.md (``**`fs/`**: ...`` or ``* `adapters/`: ...``)."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for para in re.split(r"\n\s*\n|\n(?=\* `)", text):
        m = re.match(r"\s*(?:\*\*`|\* `)([a-z_]+)/`", para)
        if m:
            out[m.group(1)] = out.get(m.group(1), "") + "\n" + para
    return out


def architecture_gaps(paragraphs: dict[str, str]) -> list[str]:
    gaps = []
    layers = sorted(d.name for d in PACKAGE.iterdir() if (d / "__init__.py").is_file())
    for layer in layers:
        body = paragraphs.get(layer)
        if body is None:
            gaps.append(f"{layer}/: no paragraph in docs/architecture.md")
            continue
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            if path.name == "__init__.py":
                continue
            if not re.search(r"(?<![\w.])" + re.escape(path.name) + r"(?!\w)", body):
                gaps.append(f"prefetch/{path.relative_to(PACKAGE)}: not named in {layer}/'s paragraph")
        for name in set(re.findall(r"`((?:[a-z_]+/)*[a-z0-9_]+\.py)`", body)):
            if "/" in name:  # `flow/file_list.py` (another layer's), `configs/pip.py` (this one's), `tests/origin.py`
                found = any((base / name).is_file() for base in (PACKAGE, PACKAGE / layer, ROOT))
            else:
                found = bool(list((PACKAGE / layer).rglob(name))) or (PACKAGE / name).is_file()
            if not found:
                gaps.append(f"{layer}/'s paragraph names {name}, which is not in prefetch/{layer}/")
    return gaps


def test_architecture_names_every_module():
    gaps = architecture_gaps(_layer_paragraphs())
    assert not gaps, "docs/architecture.md and the code differ:\n" + "\n".join(gaps)


def test_architecture_check_sees_a_missing_module():
    paragraphs = _layer_paragraphs()
    assert {"fs", "engine", "adapters", "commands"} <= set(paragraphs)
    paragraphs["fs"] = paragraphs["fs"].replace("locks.py", "lox.py")
    gaps = architecture_gaps(paragraphs)
    assert "prefetch/fs/locks.py: not named in fs/'s paragraph" in gaps
    assert "fs/'s paragraph names lox.py, which is not in prefetch/fs/" in gaps


@pytest.mark.parametrize("page", REFERENCE, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_repository_paths_exist(page):
    text = page.read_text(encoding="utf-8")
    quoted = set(re.findall(r"`((?:prefetch|tests|bench|tools)/[A-Za-z0-9_./-]+)`", text))
    generated = {"bench/out/latest.json"}  # written by bench/run.py
    missing = sorted(q for q in quoted - generated if not (ROOT / q.rstrip("/")).exists())
    missing += sorted(t for t in set(re.findall(r"\b(test_[a-z0-9_]+\.py)\b", text)) if not (ROOT / "tests" / t).exists())
    assert not missing, f"{page.name} quotes paths that do not exist: {missing}"


EXAMPLE = re.compile(r"^\s*(?:\$ |!|%)?\s*(?:[A-Z_]+=\S+ )*(?:prefetch|python -m prefetch) (.*)$")


def cli_examples(text: str) -> list[str]:
    """The ``prefetch ...`` command lines of ``text``'s code blocks, without comments and pipes."""
    lines = []
    for block in re.findall(r"^```(?:text|bash|console|sh)?\n(.*?)^```", text, re.M | re.S):
        for line in block.splitlines():
            m = EXAMPLE.match(line)
            if m:
                command = re.split(r"\s+#", m.group(1))[0]
                lines.append(re.split(r" \| | > | 2>| && ", command)[0].strip())
    return lines


def parse_error(command_line: str) -> str | None:
    """Why click would refuse ``prefetch COMMAND_LINE`` (a command, option or value), or None."""
    import shlex

    from prefetch.commands.group import cli

    try:
        args = [a for a in shlex.split(command_line) if a != "--plain"]  # (accepted anywhere: cli.take_plain_flag)
        command, parent, name = cli, None, "prefetch"
        while isinstance(command, click.Group):
            if not args:
                return None  # `prefetch jobs`: its help
            ctx = click.Context(command, info_name=name, parent=parent)
            name, args = args[0], args[1:]
            sub = command.get_command(ctx, name)
            if sub is None:
                return f"no command {name!r}"
            command, parent = sub, ctx
        command.make_context(name, args, parent=parent)
    except click.exceptions.Exit:
        return None
    except (click.ClickException, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def test_every_cli_example_parses():
    """Each example as typed names a command that exists, with options and values it takes."""
    bad, seen = [], 0
    for page in REFERENCE:
        for line in cli_examples(page.read_text(encoding="utf-8")):
            if "..." in line:  # (a placeholder: `get ... -b`)
                continue
            seen += 1
            why = parse_error(line)
            if why:
                bad.append(f"{page.relative_to(ROOT)}: prefetch {line}: {why}")
    assert seen > 100
    assert not bad, "examples that fail as typed:\n" + "\n".join(bad)


def test_every_help_example_parses():
    """The examples in each command's --help text parse too (they are the first reference a user sees)."""
    from prefetch.commands.group import cli

    bad, seen = [], 0
    for full, command in [("", cli), *cli_commands()]:
        text = command.get_help(click.Context(command, info_name=full or "prefetch"))
        for line in cli_examples("```text\n" + text + "\n```\n"):
            if line and "..." not in line:
                seen += 1
                why = parse_error(line)
                if why:
                    bad.append(f"prefetch {full} --help: prefetch {line}: {why}")
    assert seen > 50
    assert not bad, "\n".join(bad)


def test_example_check_sees_a_bad_example():
    text = "```text\n!prefetch get cifar10 -b   # ok\n!prefetch wait --timout 5\n$ prefetch mirror us tuna\n```\n"
    lines = cli_examples(text)
    assert lines == ["get cifar10 -b", "wait --timout 5", "mirror us tuna"]
    assert parse_error(lines[0]) is None
    assert "--timout" in parse_error(lines[1])
    assert parse_error(lines[2])
    assert "expected" in parse_error("wait --timeout soon") or "not a valid" in parse_error("wait --timeout soon")


def test_adding_examples_load(tmp_path):
    """adding.md's registry and mirrors.toml entries, saved as shown, load with the real loaders."""
    from prefetch.cache.registry import parse_registry_file
    from prefetch.mirrors.catalog import load_catalog

    blocks = re.findall(r"^```toml\n(.*?)^```", (DOCS / "adding.md").read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 2
    registry = tmp_path / "registry.toml"
    registry.write_text(blocks[0].replace('"..."', '"' + "ab" * 32 + '"'), encoding="utf-8")  # the elided hash
    (spec,) = parse_registry_file(registry)
    assert spec.name == "flowers" and spec.files[0].target == "flower_photos.tgz"
    assert list(spec.files[0].extract) == ["flower_photos-target"]

    config = tmp_path / "config"
    config.mkdir()
    (config / "mirrors.toml").write_text(blocks[1], encoding="utf-8")
    catalog = load_catalog(config_dir=config)
    assert catalog.get("corp").pypi == "http://10.0.0.2:3141/root/pypi/+simple/"
    assert catalog.get_dataset("team").url == "http://10.0.0.5/keras-datasets/"


def test_index_links_every_page():
    """docs/index.md's "Where to read on" leads to every page of the site."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z0-9/_-]+\.md)(?:#[^)]*)?\)", index))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")} - {"index.md"}
    assert not pages - linked, f"pages docs/index.md does not link: {sorted(pages - linked)}"


def test_every_layer_is_listed_where_the_layers_are_listed():
    """tests/test_layers.py's LAYERS, architecture.md's table and prefetch/__init__'s docstring agree."""
    import prefetch
    from tests.test_layers import LAYERS

    layers = [layer for layer in LAYERS if layer not in ("__main__", "__init__")]
    table = (DOCS / "architecture.md").read_text(encoding="utf-8").split("## The layers", 1)[1].split("\n\n", 2)[1]
    docstring = prefetch.__doc__.split("Layers, lowest first", 1)[1]
    for layer in layers:
        assert re.search(rf"`{layer}/?`", table), f"{layer}: not in architecture.md's table of layers"
        assert re.search(rf"^\s+(?:.*[ ,])?{layer}/?(?:,|\s)", docstring, re.M), f"{layer}: not in prefetch/__init__'s docstring"
