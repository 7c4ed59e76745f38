"""The ``prefetch`` click group: its commands, each imported from its module on first use.

``cli.py`` runs it (and runs a plain ``get`` without it: ``commands/get_args.py``).
"""

from __future__ import annotations

import click

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

    def resolve_command(self, ctx: click.Context, args: list[str]):
        # click suggests close names from ``self.commands``, which a lazy group leaves empty.
        name = args[0] if args else ""
        if name and name not in COMMANDS and not name.startswith("-") and not ctx.resilient_parsing:
            import difflib

            close = difflib.get_close_matches(name, list(COMMANDS), n=2, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {' or '.join(repr(c) for c in close)}?")
        return super().resolve_command(ctx, args)

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
