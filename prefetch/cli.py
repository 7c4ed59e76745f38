"""The ``prefetch`` command: a lazy click group over ``prefetch.commands.*``.

Each sub-command lives in its own module and is imported only when it runs, so
``prefetch --help`` and ``prefetch status`` start almost as fast as Python
itself (requests and tqdm are never imported for them). A plain ``get`` (every
token an option of ``get`` spelled in full, or a name) is read without click at all
(``commands/get_args.py``); click reads every other line (``commands/group.py``).
"""

from __future__ import annotations

import sys

from prefetch.errors import OPEN_FILES_ERRNOS, ExitCode, PrefetchError, end_process


def __getattr__(name: str):
    """``cli`` (the click group), ``COMMANDS`` and ``LazyGroup``, from ``commands/group.py`` on first use."""
    if name in ("cli", "COMMANDS", "LazyGroup"):
        from prefetch.commands import group

        return getattr(group, name)
    raise AttributeError(f"module 'prefetch.cli' has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; map errors to one stderr line and their exit code.

    In a Python process that goes on after it (a notebook kernel, a test), the SIGINT,
    SIGTERM and SIGHUP handlers are as they were before: a ``get`` ignores interrupts once its outcome is decided
    (``stop_on_interrupt(restore=False)``: a late Ctrl-C must not turn exit 0 into a death
    by signal), which only the process entry (:func:`run`) may leave so.
    """
    import _signal  # (the C module, loaded at start-up; ``signal`` is not)

    signums = [getattr(_signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(_signal, name)]
    try:
        before = {signum: _signal.getsignal(signum) for signum in signums}
    except ValueError:  # pragma: no cover - (no signals here)
        before = {}
    try:
        _main(argv)
    finally:
        if not _EXITS_AFTER[0]:
            for signum, handler in before.items():
                try:
                    if handler is not None and _signal.getsignal(signum) is not handler:
                        _signal.signal(signum, handler)
                except ValueError:  # not the main thread: nothing was changed there either
                    pass


_EXITS_AFTER = [False]  # run(): the process ends right after main()


def _own_interrupts() -> None:
    """Python's SIGINT handler again in place of the one ``prefetch/__init__`` set for the
    command's start (``_interrupted_early``): from here a Ctrl-C is a ``KeyboardInterrupt`` that
    ``_main`` turns into the same line, after the ``finally`` blocks it runs through."""
    import _signal

    early = getattr(sys.modules.get("prefetch"), "_interrupted_early", None)  # (the package above: no import)
    if early is not None and _signal.getsignal(_signal.SIGINT) is early:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _test_pause("main")


def _test_pause(where: str) -> None:
    """Tests only (inert unless ``PREFETCH_TEST_PAUSE_START`` names ``where``): the command's start
    stops here a while, saying so on stderr, for a Ctrl-C to land in it: ``import`` (in ``import
    prefetch.cli``, before ``_main``), ``main`` (in ``_main``, its handler back)."""
    import os

    if os.environ.get("PREFETCH_TEST_PAUSE_START") == where:
        import time

        os.write(2, f"paused at {where}\n".encode())
        time.sleep(30)


def _main(argv: list[str] | None) -> None:
    try:
        _own_interrupts()
        args = take_plain_flag(list(sys.argv[1:] if argv is None else argv))
        rv = _run(args)
    except PrefetchError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted; run the same command again to resume", ExitCode.INTERRUPTED)
    except BrokenPipeError:
        sys.exit(ExitCode.FAILURE)
    except Exception as exc:  # noqa: BLE001 - click's own errors, then the last resort
        click = sys.modules.get("click")  # (click's errors come only from a click that was loaded)
        if isinstance(exc, OSError) and exc.errno in OPEN_FILES_ERRNOS:  # (`ulimit -n 12`: no bug, no report)
            from prefetch.errors import too_many_open_files

            _fail(str(too_many_open_files()), ExitCode.FILESYSTEM)
        if click is not None and isinstance(exc, click.exceptions.Abort):
            _fail("interrupted; run the same command again to resume", ExitCode.INTERRUPTED)
        elif click is not None and isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
            # `prefetch` or `prefetch jobs` alone: the help as `--help` shows it, not one squeezed line.
            _show_help(exc.ctx)
        elif isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
            _disk_failed(exc)
        elif isinstance(exc, FileNotFoundError) and exc.filename is None and (removed := _cwd_removed()):
            # (os.getcwd()'s, under a relative path made absolute: -o, --cache-dir, KERAS_HOME)
            _fail(str(removed), removed.exit_code)
        elif isinstance(exc, OSError) and exc.errno == 36:  # ENAMETOOLONG: a path the user gave (or its URL's name)
            _fail(f"{exc.filename}: {exc.strerror}; the filesystem allows names of up to 255 bytes; give a shorter "
                  f"path", ExitCode.USAGE)
        elif click is not None and isinstance(exc, click.UsageError):
            # One line, like every other error; the command's --help has the rest.
            command = exc.ctx.command_path if exc.ctx is not None else "prefetch"
            _fail(f"{exc.format_message()} (see `{command} --help`)", ExitCode.USAGE)
        elif click is not None and isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        elif isinstance(exc, RuntimeError) and isinstance(exc.__cause__, KeyboardInterrupt):
            # (Ctrl-C inside a lazy import's dataclass field: Python 3.11 wraps it; ui.interrupt.is_interrupt)
            _fail("interrupted; run the same command again to resume", ExitCode.INTERRUPTED)
        # A bug: never a raw traceback in a cell.
        where = write_crash_report(exc, argv)
        _fail(f"internal error (a bug in prefetch): {type(exc).__name__}: {exc}; the full traceback was "
              f"written to {where}; please report it", ExitCode.FAILURE)
    sys.exit(int(rv) if isinstance(rv, int) else 0)


def _cwd_removed() -> PrefetchError | None:
    """``fs.paths.current_dir``'s error when the current directory is gone (a temporary folder
    removed under a kernel); None when it is there."""
    from prefetch.fs.paths import current_dir

    try:
        current_dir()
    except PrefetchError as removed:
        return removed
    return None


def _run(args: list[str]):
    """The command's return value: a plain ``get`` without click, any other line through click."""
    if args[:1] == ["get"]:
        from prefetch.commands.get_args import parse_get

        params = parse_get(args[1:])
        if params is not None:
            from prefetch.commands.get_run import run_get

            try:
                return run_get(**params)
            except (EOFError, KeyboardInterrupt):  # as click: a blank line closes the terminal's ^C
                sys.stderr.write("\n")
                sys.stderr.flush()
                raise KeyboardInterrupt from None
            except OSError as exc:
                _broken_pipe(exc)
    from prefetch.commands.group import cli
    from prefetch.commands.invoked import command_name

    # (`Usage: python -m prefetch get ...` when so run without a `prefetch` on PATH)
    return cli.main(args=args, prog_name=command_name(), standalone_mode=False)


def _broken_pipe(exc: OSError) -> None:
    """What click's ``main`` does with an ``OSError``: EPIPE exits 1 with the streams' flushes
    quieted, anything else goes on."""
    import errno

    if exc.errno != errno.EPIPE:
        raise exc
    try:
        from click.utils import _PacifyFlushWrapper
    except ImportError:  # (click's own, private)
        sys.exit(1)
    sys.stdout = _PacifyFlushWrapper(sys.stdout)
    sys.stderr = _PacifyFlushWrapper(sys.stderr)
    sys.exit(1)


def run() -> None:
    """The process's entry point (the ``prefetch`` script, ``python -m prefetch``): ``main()``, then exit.

    The interpreter's own teardown (every module and object freed one by one: 20-30 ms of a
    ``get``, CPU included) is skipped: the exit handlers run, the streams are flushed and the
    process ends with the command's code (``errors.end_process``).
    Callers inside a Python process (a notebook kernel) use ``main()``: its ``SystemExit``
    must reach them.
    """
    defer_import("inspect")
    defer_import("ssl")
    defer_import("calendar")
    defer_import("datetime")
    defer_import("selectors")
    defer_import("array")
    _EXITS_AFTER[0] = True
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):  # (en_US.UTF-8's)
        # A path that is not UTF-8 (its bytes decoded as surrogates) is written as its bytes, as
        # ``ls`` writes it, not an internal error; ``--print-paths | xargs`` gets the real name.
        sys.stdout.reconfigure(errors="surrogateescape")
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            if not isinstance(exc.code, int) or isinstance(exc.code, bool):
                raise  # (a message for Python to print)
            end_process(exc.code)
            raise
    end_process(0)


def defer_import(name: str) -> None:
    """Put a stand-in for the module ``name`` in ``sys.modules``: the real module is imported
    the first time one of its attributes is used, and the stand-in then holds them all.

    In the command's own process (``run``), for modules imported at the top of others and
    used only sometimes:

    * ``inspect``: ``dataclasses`` uses it only for a record without a docstring
      (``inspect.signature`` for the class's ``__doc__``); neither a ``get`` nor its ``-b``
      launcher has one, and ``inspect`` with ``ast``, ``dis`` and ``tokenize`` is ~23 M
      instructions (~6 ms) of either process;
    * ``ssl``: ``http.client`` imports it (the direct path reads its answers with
      ``http.client``), and only an https URL uses it (~19 M instructions of a ``get``);
    * ``calendar`` and ``datetime`` (with ``locale``): ``http.client``'s ``email.utils``
      imports them for date functions a ``get`` never calls (~10 M);
    * ``selectors`` and ``array``: ``socket`` imports them for ``sendfile`` and
      ``send_fds``/``recv_fds``, which a ``get`` never calls.

    Nothing happens when ``name`` is already imported (a notebook kernel, a test run).
    ``name`` is a top-level module's.
    """
    if "." in name:
        raise ValueError(f"defer_import: {name!r} is not a top-level module")
    if name in sys.modules:
        return
    import types
    from _thread import RLock

    lock, loaded = RLock(), []

    class Deferred(types.ModuleType):
        def __getattr__(self, attr: str):
            with lock:
                if not loaded:
                    real = sys.modules.get(name)
                    if real is self or real is None:
                        sys.modules.pop(name, None)
                        try:
                            real = __import__(name)  # (a top-level module's name)
                        except BaseException:
                            sys.modules.setdefault(name, self)
                            raise
                    vars(self).update(vars(real))  # (what a holder of the stand-in reads from now on)
                    loaded.append(True)
            try:
                return vars(self)[attr]
            except KeyError:
                raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    sys.modules[name] = Deferred(name)


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
    try:
        from prefetch.commands.error_line import error_line
        from prefetch.commands.get_args import echo
        from prefetch.commands.invoked import typed  # (`python -m prefetch ...` in its advice when so run)
    except OSError:  # (no file left to import them from: `ulimit -n`) the line as it is
        error_line, echo, typed = str, None, str
    line = typed(error_line(message))
    try:
        if echo is None:
            sys.stderr.write(f"prefetch: error: {line}\n")
            sys.stderr.flush()
        else:
            echo(f"prefetch: error: {line}", err=True)
    except OSError:  # (stderr full or gone too: the exit code is all that is left)
        _quiet_streams()
    sys.exit(int(code))


_DISK_ERRNOS = (28, 122, 27, 5)  # ENOSPC, EDQUOT, EFBIG, EIO: the machine's condition, never a bug


def _disk_failed(exc: OSError) -> None:
    """An ``OSError`` of a full or failing disk that reached the last resort: one line, exit 5.
    Most often the command's own output (``prefetch status > out.txt`` on a full disk, or
    ``> /dev/full``): the rest of it is dropped, not flushed again at exit."""
    output = _writing_stdout(exc)
    if output:
        _quiet_streams(stderr=False)
    what = "writing the output" if output else "writing a file"
    _fail(f"{what}: {exc.strerror or exc} (errno {exc.errno}); free space (or send the output elsewhere) and "
          f"run it again", ExitCode.FILESYSTEM)


def _writing_stdout(exc: BaseException) -> bool:
    """Whether ``exc`` came out of a write to standard output (``click.echo``'s ``file``, a print)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    streams = (sys.stdout, sys.__stdout__)
    return any(value is stream for value in tb.tb_frame.f_locals.values() for stream in streams if stream is not None)


def _quiet_streams(*, stderr: bool = True) -> None:
    """Streams whose buffered rest would fail again at exit: their flushes made silent."""
    try:
        from click.utils import _PacifyFlushWrapper
    except ImportError:  # (click's own, private)
        return
    sys.stdout = _PacifyFlushWrapper(sys.stdout)
    if stderr:
        sys.stderr = _PacifyFlushWrapper(sys.stderr)


def _show_help(ctx) -> None:
    """A command group called without its command: its help, on stdout, exit 2 (a usage error)."""
    from prefetch.commands.get_args import echo

    try:
        if ctx is not None:
            echo(ctx.get_help())
    except OSError as exc:  # (as after any command: a full disk is one line, a closed pipe exits 1)
        if exc.errno in _DISK_ERRNOS:
            _disk_failed(exc)
        _quiet_streams()
        sys.exit(int(ExitCode.FAILURE))
    sys.exit(int(ExitCode.USAGE))


_test_pause("import")  # (tests: a Ctrl-C in ``import prefetch.cli``; inert unless PREFETCH_TEST_PAUSE_START=import)
