"""``prefetch get``'s options, declared once, and its command line read without click.

``OPTIONS`` is the one declaration: ``commands/get.py`` makes the click command from it
(its ``--help``, its errors), and :func:`parse_get` reads the common command lines with
it without importing click (~70 M instructions, a sixth of a whole ``get`` of a small
file, and of the ``get -b`` launcher in a notebook cell; see docs/speed.md). It takes
only what it reads exactly as click would: every token an option of ``get`` spelled in
full (``--name``, ``--name=VALUE``, ``-x``), or a name; every value one click would
accept unchanged. Anything else (``--help``, ``-bq``, ``-oFILE``, ``--``, a value click
would refuse, a usage error) returns None, and click reads the line, with its messages.
"""

from __future__ import annotations

import os
import sys

# Value kinds: None (a flag), "text", "int", "int>=0", "int>=1", "float>0", "path" (click.Path()),
# "dir" (click.Path(file_okay=False)), "file" (click.Path(dir_okay=False)).
# (declarations, parameter, kind, multiple, metavar, help)
OPTIONS: tuple[tuple[tuple[str, ...], str, str | None, bool, str | None, str], ...] = (
    (("-b", "--background"), "background", None, False, None,
     "Detach and return at once; follow with status/log/wait."),
    (("--cache-dir",), "cache_dir", "dir", False, None,
     "Keras root to fill (default $KERAS_HOME or ~/.keras); for hf:// and ms:// names, that hub's cache (as "
     "their clients' cache_dir=)."),
    (("--mirror",), "mirrors", "text", True, "NAME|URL",
     "Flat dataset mirror or s3://BUCKET/PREFIX team store (repeatable). Default $PREFETCH_DATASET_MIRROR. "
     "For hf:// names: the Hub endpoint (hf-mirror, or a URL); for ms:// the ModelScope endpoint; for nltk: an "
     "NLTK data mirror with BASE/index.xml (http(s), s3://BUCKET/PREFIX, or a folder)."),
    (("--seed",), "seed", "text", False, "s3://BUCKET/PREFIX|NAME",
     "Team store: read what it has, fetch the rest elsewhere, upload what it lacked."),
    (("--also-origin",), "also_origin", None, False, None, "With --mirror: use the origin too, in parallel."),
    (("--connections",), "connections", "int", False, "N",
     "Connections per file (default: automatic, 8 doubling up to 32 while it pays)."),
    (("--host-connections",), "host_connections", "int>=1", False, "N",
     "Connections to one host from all files together (default 32, $PREFETCH_HOST_CONNECTIONS); a 429/503 lowers "
     "it."),
    (("--sha256",), "sha256", "text", False, "HEX", "Expected sha256 of a URL download."),
    (("--md5",), "md5", "text", False, "HEX", "Expected md5 of a URL download."),
    (("-o", "--output"), "output", "path", False, None,
     "Where to save a URL download (a directory, or ending in /: inside it)."),
    (("-i", "--input-file"), "input_file", "text", False, "FILE",
     "Read URLs from FILE ('-' = stdin): one per line, with optional sha256=HEX md5=HEX out=NAME."),
    (("-P", "--output-dir"), "output_dir", "dir", False, None, "Save URL downloads into DIR (default: here)."),
    (("--content-disposition",), "content_disposition", None, False, None,
     "URLs: name the file as the server's Content-Disposition says (filename*=, then filename=), as wget "
     "--content-disposition and curl -OJ; a name that is not a plain file name keeps the URL's."),
    (("--extract",), "extract", None, False, None,
     "Extract URL downloads that are archives (tar, tar.gz/bz2/xz, zip), safely."),
    (("--extract-to",), "extract_to", "dir", False, None, "With --extract: into DIR (default: beside the file)."),
    (("--limit-rate",), "limit_rate", "text", False, "RATE",
     "Total bandwidth of all connections, e.g. 2M or 500k (bytes/s, 1024-based)."),
    (("--header",), "headers", "text", True, "'NAME: VALUE'",
     "Extra request header (repeatable); never logged or stored."),
    (("--registry",), "registries", "file", True, None, "Extra registry TOML (repeatable)."),
    (("--include",), "include", "text", True, "GLOB",
     "hf:// and ms:// repos: only files matching (repeatable), e.g. '*.safetensors'."),
    (("--exclude",), "exclude", "text", True, "GLOB", "hf:// and ms:// repos: leave out files matching (repeatable)."),
    (("--lfs-from",), "lfs_from", "text", False, "ms://OWNER/NAME",
     "hf:// repo: take LFS files that this ModelScope repo also holds (same sha256) from there too, checked by the "
     "Hub's sha256."),
    (("--root",), "root", "dir", False, None,
     "torchvision:<Class> datasets: the root you pass to torchvision (default ./data)."),
    (("--torch-hub",), "torch_hub", None, False, None,
     "URLs: save into torch.hub's checkpoints ($TORCH_HOME/hub/checkpoints), checked by the name's sha256 prefix."),
    (("--retries",), "retries", "int>=0", False, "N",
     "Retries in a row without progress before giving up (default 8, $PREFETCH_RETRIES)."),
    (("--timeout",), "timeout", "float>0", False, "S",
     "Give up on a source after S seconds without a byte; a third of it for DNS failures, refused connections and "
     "web pages (default 30, $PREFETCH_TIMEOUT)."),
    (("--fail-fast",), "fail_fast", None, False, None, "Stop every file at the first fatal error."),
    (("--force",), "force", None, False, None,
     "Download again even when a verified file (or hf:// repo) is in place."),
    (("--print-paths",), "print_paths", None, False, None,
     "Print each placed path on its own line as its file lands (for | xargs); progress goes to stderr."),
    (("-0", "--null"), "null", None, False, None,
     "With --print-paths (implied): end each path with NUL, not newline (xargs -0)."),
    (("--nice/--no-nice",), "nice", None, False, None,
     "With -b: run the job at low CPU and I/O priority (default; $PREFETCH_NICE=0 turns it off)."),
    (("--json",), "as_json", None, False, None, "Print the results as JSON."),
    (("-q", "--quiet"), "quiet", None, False, None, "No progress output."),
)

# What each spelling sets: option -> (parameter, kind, multiple, the value a flag sets)
_SPELLINGS: dict[str, tuple[str, str | None, bool, bool]] = {}
for _decls, _param, _kind, _multiple, _metavar, _help in OPTIONS:
    for _decl in _decls:
        _on, _, _off = _decl.partition("/")
        _SPELLINGS[_on] = (_param, _kind, _multiple, True)
        if _off:
            _SPELLINGS[_off] = (_param, _kind, _multiple, False)
del _decls, _param, _kind, _multiple, _metavar, _help, _decl, _on, _off


def defaults() -> dict:
    """The parameters of a ``get`` given no option: click's defaults for ``OPTIONS``."""
    out: dict = {"names": ()}
    for _decls, param, kind, multiple, _metavar, _help in OPTIONS:
        out[param] = () if multiple else (None if kind is not None or param == "nice" else False)
    return out


def parse_get(args: list[str]) -> dict | None:
    """The parameters click would pass for ``prefetch get ARGS``, or None: let click read it.

    None also for every line click would refuse, and for the usage errors ``get`` itself
    raises (click reports them, with their usual wording)."""
    if "_PREFETCH_COMPLETE" in os.environ:  # click's shell completion
        return None
    values = defaults()
    names: list[str] = []
    rest = iter(args)
    for token in rest:
        if not token.startswith("-"):
            names.append(token)
            continue
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        spelling = _SPELLINGS.get(name)
        if spelling is None:  # --help, -h, --, -, -bq, -oFILE, a misspelling, a negative number
            return None
        param, kind, multiple, flag_value = spelling
        if kind is None:
            if eq:
                return None
            values[param] = flag_value
            continue
        if eq:
            value = attached
        else:
            value = next(rest, None)
            if value is None or value.startswith("-"):  # click would take it; rare enough to let it
                return None
        converted = _convert(kind, value)
        if converted is _REFUSED:
            return None
        values[param] = values[param] + (converted,) if multiple else converted
    values["names"] = tuple(names)
    if not names and values["input_file"] is None:
        return None  # get's usage error
    if (values["print_paths"] or values["null"]) and (values["background"] or values["as_json"]):
        return None  # get's usage error
    return values


_REFUSED = object()


def _convert(kind: str, value: str):
    """``value`` as click's type for ``kind`` returns it, or _REFUSED where click would not return it."""
    if kind == "text":
        return value
    if kind.startswith("int"):
        try:
            number = int(value)
        except ValueError:
            return _REFUSED
        return _REFUSED if kind != "int" and number < int(kind[-1]) else number
    if kind == "float>0":
        try:
            number = float(value)
        except ValueError:
            return _REFUSED
        return _REFUSED if number <= 0 else number  # (click.FloatRange(min=0, min_open=True))
    # click.Path: no check for a path that is not there; else a file where a directory is
    # wanted (or the reverse) and an unreadable path are refused.
    try:
        st = os.stat(value)
    except OSError:
        return value
    except ValueError:  # a NUL in it
        return _REFUSED
    import stat

    if kind == "dir" and stat.S_ISREG(st.st_mode) or kind == "file" and stat.S_ISDIR(st.st_mode):
        return _REFUSED
    return value if os.access(value, os.R_OK) else _REFUSED


def echo(message: str, *, err: bool = False) -> None:
    """``click.echo(message, err=err)`` without importing click for plain ASCII text (the
    common case: click writes it unchanged); anything else goes through click."""
    if not message.isascii() or "\x1b" in message:
        import click

        click.echo(message, err=err)
        return
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    stream.write(message + "\n")
    stream.flush()
