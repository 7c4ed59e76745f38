"""The ``prefetch`` command: a lazy click group over ``prefetch.commands.*``.

Each sub-command lives in its own module and is imported only when it runs, so
``prefetch --help`` and ``prefetch status`` start almost as fast as Python
itself (requests and tqdm are never imported for them).
"""

from __future__ import annotations

import sys

import click

from prefetch.errors import ExitCode, PrefetchError

# name -> (module:attribute, one-line help shown by ``prefetch --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "get": ("prefetch.commands.get:get", "Download datasets or URLs, resumable and verified."),
    "list": ("prefetch.commands.listing:list_datasets", "Datasets known, their local state and size on disk."),
    "verify": ("prefetch.commands.verify:verify", "Re-check the hashes of cached datasets or files."),
    "rm": ("prefetch.commands.housekeeping:rm", "Remove datasets from the cache (never a running download)."),
    "clean": ("prefetch.commands.housekeeping:clean", "Remove stale partial downloads and leftovers (--dry-run)."),
    "status": ("prefetch.commands.jobs:status", "Background jobs: state, bytes, %, speed, ETA."),
    "log": ("prefetch.commands.jobs:log", "Show (or follow with -f) a job's log."),
    "wait": ("prefetch.commands.jobs:wait", "Block until jobs finish; exit with their result."),
    "cancel": ("prefetch.commands.jobs:cancel", "Stop a background job, keeping resumable state."),
    "resume": ("prefetch.commands.jobs:resume", "Restart an interrupted or cancelled job."),
    "jobs": ("prefetch.commands.jobs:jobs", "Manage job records (jobs clean)."),
    "mirror": ("prefetch.commands.mirror:mirror", "Package mirrors: list, show, bench, use, restore."),
    "doctor": ("prefetch.commands.doctor:doctor", "What is configured and why downloads may fail."),
    "push": ("prefetch.commands.store:push", "Upload verified cached files to a team store (s3://)."),
    "export": ("prefetch.commands.store:export", "Write the flat mirror layout + SHA256SUMS for a static host."),
    "demo": ("prefetch.commands.demo:demo", "The whole flow offline, against a built-in local origin."),
}


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, _, attr = entry[0].partition(":")
        import importlib

        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Uses the static help texts: listing commands imports none of them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry[1]) for name, entry in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="prefetch-datasets", prog_name="prefetch")
@click.option("--plain", is_flag=True, help="Plain log lines: no colour, no \\r, no bars (also PREFETCH_PLAIN=1; "
              "accepted anywhere on the line).")
def cli(plain: bool) -> None:
    """Get datasets and packages onto a notebook machine fast, safely, in the background.

    \b
    Examples (in a notebook cell):
      !prefetch get cifar10 imdb -b     # returns at once; downloads keep going
      !prefetch status                  # per-file %, speed, ETA
      !prefetch wait                    # blocks until verified and in place
      !prefetch mirror use fastest      # pip now uses the fastest mirror

    \b
    Output fits where it lands: tables are never cut to the terminal's width;
    NO_COLOR=1 means no escape byte, FORCE_COLOR=1 colour even in a pipe.
    """


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; map errors to one stderr line and their exit code."""
    args = take_plain_flag(list(sys.argv[1:] if argv is None else argv))
    try:
        rv = cli.main(args=args, prog_name="prefetch", standalone_mode=False)
    except PrefetchError as exc:
        _fail(str(exc), exc.exit_code)
    except click.exceptions.Abort:
        _fail("interrupted; run the same command again to resume", ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        _fail("interrupted; run the same command again to resume", ExitCode.INTERRUPTED)
    except click.UsageError as exc:
        # One line, like every other error; the command's --help has the rest.
        command = exc.ctx.command_path if exc.ctx is not None else "prefetch"
        _fail(f"{exc.format_message()} (see `{command} --help`)", ExitCode.USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(ExitCode.FAILURE)
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug, never a raw traceback in a cell
        where = write_crash_report(exc, argv)
        _fail(f"internal error (a bug in prefetch): {type(exc).__name__}: {exc}; the full traceback was "
              f"written to {where}; please report it", ExitCode.FAILURE)
    sys.exit(int(rv) if isinstance(rv, int) else 0)


def run() -> None:
    """The process's entry point (the ``prefetch`` script, ``python -m prefetch``): ``main()``, then exit.

    After a command that succeeded, the interpreter's own teardown (every module and object
    freed one by one: 20-30 ms of a ``get``, CPU included) is skipped: the exit handlers run,
    the streams are flushed and the process ends. Any other outcome exits the usual way.
    Callers inside a Python process (a notebook kernel) use ``main()``: its ``SystemExit``
    must reach them.
    """
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    _exit_now()


def _exit_now() -> None:
    """End a successful process at once, unless a thread that Python would wait for is alive."""
    import atexit
    import os
    import threading

    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(0)  # Python joins it, as it always would
    atexit._run_exitfuncs()  # what they do at a normal exit (and they are not run twice)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: BLE001 - a closed or broken stream: the usual exit reports it
        sys.exit(0)
    os._exit(0)


def write_crash_report(exc: BaseException, argv: list[str] | None) -> str:
    """Write the traceback of an unexpected exception to a file; return its path (or where it went)."""
    import os
    import tempfile
    import time
    import traceback

    text = (f"prefetch {' '.join(sys.argv[1:] if argv is None else argv)}\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    name = f"crash-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}.txt"
    candidates = []
    try:
        from prefetch.fs.paths import state_dir

        candidates.append(state_dir() / "crashes")
    except Exception:  # noqa: BLE001 - the state dir itself may be what is broken
        pass
    candidates.append(None)
    for directory in candidates:
        try:
            if directory is None:
                fd, path = tempfile.mkstemp(prefix="prefetch-crash-", suffix=".txt")
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                return path
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / name
            from prefetch.fs.safefs import write_new

            write_new(path, text.encode("utf-8", "replace"), mode=0o600)
            return str(path)
        except Exception:  # noqa: BLE001
            continue
    sys.stderr.write(text)
    return "stderr"


def take_plain_flag(args: list[str]) -> list[str]:
    """``--plain`` anywhere before ``--`` sets ``PREFETCH_PLAIN=1`` (for this process and its workers)."""
    import os

    end = args.index("--") if "--" in args else len(args)
    if "--plain" in args[:end]:
        os.environ["PREFETCH_PLAIN"] = "1"
        args = [a for a in args[:end] if a != "--plain"] + args[end:]
    return args


def _fail(message: str, code: int) -> None:
    line = " ".join(message.split("\n"))
    click.echo(f"prefetch: error: {line}", err=True)
    sys.exit(int(code))
