"""prefetch: background, resumable, verified downloads into the caches ML libraries read.

Public API: ``ensure()``, ``wait()``, ``status()``, ``watch()`` (see ``prefetch.api``),
``as_completed()`` (each verified path as its file lands; see ``prefetch.streaming``) with
its adapters ``torch_dataset()`` and ``tf_generator()`` (``prefetch.adapters``),
``get_file()`` (a drop-in for ``keras.utils.get_file``) and ``fetch()`` (in
``pooch.retrieve``'s spirit; see ``prefetch.dropins``), the cache housekeeping
``cache_usage()``, ``remove()`` and ``clean()`` (see ``prefetch.api``) and
the error classes in ``prefetch.errors``. Importing ``prefetch`` stays light: each name
but the errors is loaded from its module on first use, and these modules import their
machinery when a function is first called.

Layers, lowest first; a module imports only from its own layer or lower ones, in
any form (``tests/test_layers.py`` holds the rule):

    errors      PrefetchError, its subclasses and the exit codes
    model/      plain records: specs, plans, results, events
    fs/         the local filesystem, safely; locks, hashing, prefetch's own dirs
    net/        requests underneath: deadlines, failures, URL checks
    ui/         where output lands: styles, tables, event lines, progress bars
    cache/      cache layouts, the dataset registry, placing files
    archive/    safe extraction
    engine/     one download into a ``.part``, resumable, from several sources
    store/      the S3 team store and static exports
    mirrors/    the mirror catalog, its bench, the pip/uv/conda/HF configs
    hf/         Hugging Face repos in huggingface_hub's cache
    ms/         ModelScope repos in modelscope's cache
    flow/       a get request: names -> plans -> lock -> transfer -> verify -> place
    operations/ list, verify, rm, clean over what is on disk
    jobs/       background jobs and their worker
    doctor/     what is configured and why downloads fail
    demo/       the offline demo and its origin
    api, streaming, adapters, dropins  the Python API (streaming: as_completed;
                adapters/: torch and tf.data over it)
    commands/, cli  the command line
"""


def _interrupted_early(signum, frame) -> None:
    """SIGINT in the ``prefetch`` command's process before the command runs: its one line, exit 7."""
    import os

    os.write(2, b"prefetch: error: interrupted; run the same command again to resume\n")
    os._exit(7)


def _quiet_early_interrupts() -> None:
    """In the ``prefetch`` command's own process (its console script, ``python -m prefetch``), the
    first thing prefetch's code does: a Ctrl-C from here until ``cli`` reads its command line is
    the interrupt's one line and exit 7 (docs/exit-codes.md), not Python's traceback of whichever
    import it fell in (exit 1, or -2 by the signal). ``cli._main`` puts Python's own handler back
    inside its ``try``, which turns a ``KeyboardInterrupt`` into that same line. Any other process
    that imports prefetch (a notebook kernel, a script, a job's worker: ``-m prefetch.jobs.worker``,
    a user's own script that happens to be named ``prefetch``, whose ``finally`` must run) is left
    as it is: a library import never touches signals. (The interpreter's own start, site and its
    .pth files, comes before any of prefetch's code: a Ctrl-C there is Python's.)"""
    import sys

    def _entry_point_wrapper(path: str) -> bool:
        """Whether the script at ``path`` is an installer's wrapper of ``prefetch.cli:run`` (its few
        lines read, once, at the command's start), not a user's own program named ``prefetch``: besides
        its shebang and comments, only imports, the main guard, argv[0]'s fix-ups and the call (pip's
        and conda's wrapper, uv's, poetry's)."""
        try:
            with open(path, "rb") as script:
                text = script.read(4097)
        except OSError:
            return False
        code = [line.strip() for line in text.decode("utf-8", "replace").splitlines()]
        if code[:1] == ["#!/bin/sh"] and code[1:2] and code[1].startswith("'''exec' ") and code[2:3] == ["' '''"]:
            code = code[3:]  # (pip's and uv's shebang where the interpreter's path has a space or is long)
        code = [line for line in code if line and not line.startswith("#")]
        wrapper = ("import ", "from prefetch.cli import run", "if __name__ ==", "sys.argv[0] ", "if sys.argv[0].",
                   "elif sys.argv[0].", "sys.exit(run())")
        return (len(text) <= 4096 and "from prefetch.cli import run" in code and "sys.exit(run())" in code
                and all(line.startswith(wrapper) for line in code))

    main = sys.modules.get("__main__")
    argv = getattr(sys, "orig_argv", [])
    script = getattr(main, "__file__", None) or ""
    if sys.argv[:1] == ["-m"] and "-m" in argv:  # (python -m: argv[0] is "-m" while runpy imports the package)
        ours = argv[argv.index("-m") + 1:][:1] == ["prefetch"]  # (the interpreter's -m: before the command's)
    else:  # (the console script: its __main__ is the script itself, named prefetch, an installer's wrapper)
        # (run by a relative path, bin/prefetch or ./bin/prefetch, argv[0] is as typed and __file__ is
        # the current directory joined to it)
        typed = sys.argv[0] if sys.argv else ""
        ours = getattr(main, "__spec__", 1) is None and script.rpartition("/")[2] == "prefetch" and \
            bool(typed) and (typed == script or (typed[:1] != "/" and script.endswith("/" + typed))) and \
            _entry_point_wrapper(script)
    if ours:
        import _signal

        if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:  # (not one a caller set)
            _signal.signal(_signal.SIGINT, _interrupted_early)


_quiet_early_interrupts()
del _quiet_early_interrupts

from prefetch.model.lazy import lazy_names  # noqa: E402 - after the interrupt handler of the command's process
from prefetch.errors import (  # noqa: E402
    ExitCode,
    HashMismatchError,
    IntegrityError,
    InterruptedTransferError,
    JobNotFoundError,
    LocalFileError,
    NetworkError,
    NotDownloadedError,
    PrefetchError,
    UnknownDatasetError,
    UnsafeArchiveError,
    UsageError,
    WaitTimeoutError,
)

# The API's functions, each loaded from its module on first access (PEP 562): ``prefetch``
# itself is imported by every command line and background worker, which use none of them.
_LAZY = {
    "tf_generator": "prefetch.adapters",
    "torch_dataset": "prefetch.adapters",
    "cache_usage": "prefetch.api",
    "clean": "prefetch.api",
    "ensure": "prefetch.api",
    "remove": "prefetch.api",
    "status": "prefetch.api",
    "wait": "prefetch.api",
    "watch": "prefetch.api",
    "fetch": "prefetch.dropins",
    "get_file": "prefetch.dropins",
    "as_completed": "prefetch.streaming",
}


# The modules behind them: ``import prefetch`` then ``prefetch.api`` works as when they were imported here.
_SUBMODULES = ("adapters", "api", "dropins", "streaming")


# The commands' names a notebook user tries first (``prefetch.get``: AttributeError naming ``ensure``).
_HINTS = {"get": "ensure", "download": "ensure", "rm": "remove", "resume": "ensure"}

__getattr__, __dir__ = lazy_names("prefetch", globals(), _LAZY, _SUBMODULES, _HINTS)


def _arm_kernel_cells() -> None:
    """In a notebook kernel, the stop button reaches an ``ensure`` on another thread too
    (``prefetch.ui.interrupt.arm_kernel_cells``); nothing is imported anywhere else."""
    import sys

    if "IPython" in sys.modules:
        from prefetch.ui.interrupt import arm_kernel_cells

        arm_kernel_cells()


_arm_kernel_cells()
del _arm_kernel_cells


__all__ = [
    "ExitCode",
    "HashMismatchError",
    "IntegrityError",
    "InterruptedTransferError",
    "JobNotFoundError",
    "LocalFileError",
    "NetworkError",
    "NotDownloadedError",
    "PrefetchError",
    "UnknownDatasetError",
    "UnsafeArchiveError",
    "UsageError",
    "WaitTimeoutError",
    "as_completed",
    "cache_usage",
    "clean",
    "ensure",
    "fetch",
    "get_file",
    "remove",
    "status",
    "tf_generator",
    "torch_dataset",
    "wait",
    "watch",
]
