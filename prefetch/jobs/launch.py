"""Starting jobs: detach a worker (``cancel_resume.py`` cancels or resumes one).

The worker is ``python -m prefetch.jobs.worker JOB`` in a new session with its stdio
in the job's log, so it outlives a notebook cell's shell. Nothing here prints.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Callable, Mapping

from prefetch.jobs.record_types import FileStatus, JobRecord
from prefetch.jobs.records import (
    jobs_dir,
    locked_jobs,
    new_job_id,
    record_path,
    this_host,
    update_record,
    write_record,
)
from prefetch.fs.processes import process_start_time
from prefetch.fs.paths import expand_path
from prefetch.jobs.shown_command import describe_request


# -- starting ------------------------------------------------------------------------
def pin_request(request, env: Mapping[str, str] | None = None):
    """Make a request independent of the current directory and environment.

    A job may be resumed from another directory or a fresh shell: relative paths
    become absolute, the Keras root, the default dataset mirror and ``PREFETCH_NICE`` are fixed now,
    and each kind of name fixes what it reads from the environment (its planner's ``pin``).
    """
    from dataclasses import replace

    from prefetch.cache.layout import keras_root
    from prefetch.flow.planners import PLANNERS

    env = os.environ if env is None else env
    from prefetch.jobs.job_proxies import pin_proxies
    from prefetch.jobs.priority import nice_from_env

    mirrors = _pin_mirrors(request, env)
    request = replace(
        request,
        cache_dir=str(keras_root(cache_dir=request.cache_dir, env=env).absolute()),
        mirrors=mirrors,
        output=_absolute_keeping_slash(request.output) if request.output else None,
        registries=[str(expand_path(r, "--registry").absolute()) for r in request.registries],
        mirrors_from_env=request.mirrors_from_env or (not request.mirrors and bool(mirrors)),
        nice=nice_from_env(env) if request.nice is None else request.nice,
        proxies=request.proxies or pin_proxies(env),
    )
    for planner in PLANNERS:
        request = planner.pin(request, env)
    return request


def _pin_mirrors(request, env: Mapping[str, str]) -> list[str]:
    """``--mirror``, else ``PREFETCH_DATASET_MIRROR``: a dataset mirror, never taken for a hub endpoint.
    Beside names of a kind that reads ``--mirror`` as its own (``hf://``, ``ms://``, ``nltk:``) the
    variable is not pinned: a pinned mirror reads as typed, which such a kind takes for its endpoint
    and planning refuses beside other kinds; the job's datasets read the variable as the foreground
    run does (the worker keeps the environment it was started with)."""
    from prefetch.flow.planners import group_names
    from prefetch.flow.planning import requested_mirrors

    kinds = group_names(request.names)
    if any(not p.flat_mirrors for p in kinds):
        return list(request.mirrors)
    return requested_mirrors(request, env)


def _absolute_keeping_slash(path: str) -> str:
    """``path`` made absolute; a trailing ``/`` (meaning "into this directory") is kept."""
    absolute = str(expand_path(path, "-o").absolute())
    return absolute + "/" if path.endswith(("/", os.sep)) and not absolute.endswith("/") else absolute


def start_job(
    request,
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
) -> JobRecord:
    """Plan ``request`` (usage errors now), write its record and detach a worker.

    Returns at once with the record (``id``, ``pid``, ``log_path``); the worker
    carries on after this process, and its shell, exit.

    Raises:
        UsageError (and subclasses): the request is wrong (nothing was started).
        LocalFileError: the state dir cannot be written.
    """
    from prefetch.flow.planning import plan_request

    from prefetch.flow.request import job_environment

    env = dict(os.environ if env is None else env)
    request = pin_request(request, env)
    env = job_environment(request, env)  # (the passwords of what was pinned: a mirror, an endpoint; never in the record)
    plans, _ = plan_request(request, env=env)
    from prefetch.jobs.targets import check_targets_writable

    check_targets_writable(plans)  # (a read-only folder: said now, not by the job's wait)
    directory = jobs_dir(env).absolute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from prefetch.errors import LocalFileError

        raise LocalFileError(f"cannot create the jobs directory {directory}: {exc.strerror}") from None
    with locked_jobs(env):
        job_id = new_job_id(directory)
        request.job = job_id
        now = time.time()
        record = JobRecord(
            id=job_id,
            command=describe_request(request),
            request=request.to_dict(),
            files=[FileStatus(name=p.label, dataset=p.dataset, path=str(p.final)) for p in plans],
            host=this_host(),
            started=now,
            updated=now,
            log=str(directory / f"{job_id}.log"),
            fail_fast=bool(request.fail_fast),
            launcher=os.getpid(),
            launcher_start=process_start_time(os.getpid()),
        )
        write_record(record, env)

    def unlaunched() -> None:  # (no worker will ever run it, and its record cannot say so: no record)
        from prefetch.fs.safefs import lstat_or_none

        with locked_jobs(env):
            record_path(record.id, env).unlink(missing_ok=True)
            log = record.log_path  # (an empty log this run made, not a link: nothing names it now)
            st = lstat_or_none(log)
            if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_uid == os.geteuid():
                log.unlink()

    return _launch(record, env=env, python=python, note="queued", unlaunched=unlaunched)


# Files the network layer opens by a name from the environment (net/checks.py, requests' netrc lookup).
_PATH_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "NETRC", "SSLKEYLOGFILE")


def _launch(record: JobRecord, *, env: Mapping[str, str], python: str | None, note: str,
            unlaunched: Callable[[], None] | None = None) -> JobRecord:
    """Start the detached worker for ``record`` and store its pid.

    Raises:
        PrefetchError: the worker could not be started (its log cannot be written: a full
            disk, a file size limit, exit 5; the spawn fails: too many open files, an
            environment too large to pass): the record says so at once (``failed``, not
            ``queued`` until liveness gives up on it); where even that cannot be written,
            ``unlaunched()`` undoes the record (a new job's: no record that lies).
    """
    try:
        pid, reap = _start_worker(record, env=env, python=python, note=note)
    except Exception as exc:  # noqa: BLE001 - every way of not starting is recorded, then raised
        from prefetch.jobs.not_started import not_started

        raise not_started(record, exc, env, unlaunched) from None
    pid_start = process_start_time(pid)
    # The worker sets the same pid itself; whichever write comes second keeps it.
    _forget_child(pid, reap)

    def set_pid(rec: JobRecord) -> None:
        if rec.pid is None:
            rec.pid = pid
            rec.pid_start = pid_start

    return update_record(record.id, set_pid, env)


def _start_worker(record: JobRecord, *, env: Mapping[str, str], python: str | None, note: str):
    """The detached worker's pid, and how to reap it (None: a thread waits for it)."""
    log_path = record.log_path
    env = dict(env)
    for var in ("PREFETCH_HOME", "KERAS_HOME"):  # the worker runs in the jobs dir
        if env.get(var):
            env[var] = str(expand_path(env[var], var).absolute())
    for var in _PATH_VARIABLES:  # ... so a relative CA bundle or netrc must name the caller's file there too
        value = env.get(var)
        if value and not value.startswith("~") and not os.path.isabs(value):
            try:
                env[var] = os.path.abspath(value)
            except OSError:  # the caller's directory is gone: the name means nothing anywhere
                pass
    from prefetch.jobs.log_file import open_log

    pid = reap = None
    spawning = False
    try:
        # Never through a link or into a FIFO planted at the log's name.
        # Its owner's alone (0600), as the record: its lines name the URLs and paths the job fetches.
        with os.fdopen(open_log(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as log:
            # ui.render's timestamp (2026-11-22T05:40:01Z), without loading the renderer here
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            log.write(f"{stamp} job {record.id} {note}: {record.command}\n".encode("utf-8", "surrogateescape"))
            log.flush()
            spawning = True
            # A new session and no stdio left on the caller's terminal: the worker
            # survives a notebook cell's shell exiting under its pty (no & or nohup).
            # Its directory is not the caller's (which may go away): the jobs dir.
            if python is None and _SPAWN:
                pid = _spawn_worker(record.id, log.fileno(), env, str(log_path.parent))
                reap = None
            else:
                import subprocess

                proc = subprocess.Popen(
                    [python or sys.executable, "-m", "prefetch.jobs.worker", record.id],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    close_fds=True,
                    start_new_session=True,
                    env=env,
                    cwd=str(log_path.parent),
                )
                pid, reap = proc.pid, proc.wait
    except OSError as exc:
        if pid is not None:  # (closing the log after the worker started: it has its own copy; not a failed launch)
            return pid, reap
        from prefetch.errors import OPEN_FILES_ERRNOS

        if spawning or exc.errno in OPEN_FILES_ERRNOS:
            raise  # (the spawn's own, E2BIG; no descriptor left: _not_started says each)
        from prefetch.fs.files import local_error

        raise local_error(exc, log_path, instead="PREFETCH_HOME") from None  # (the log's disk: exit 5)
    return pid, reap


# os.posix_spawn (vfork and exec, no subprocess import: ~14 M instructions of a launcher)
# where the worker can leave the caller's directory out of its sys.path (-P, Python 3.11)
# and the session can be a new one (setsid).
_SPAWN = (sys.version_info >= (3, 11) and hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2")
          and sys.platform.startswith("linux"))
WORKER_DIR_ENV = "PREFETCH_WORKER_DIR"  # the directory the worker moves to first (jobs/worker.py)


def _spawn_worker(job_id: str, log_fd: int, env: Mapping[str, str], directory: str) -> int:
    """``python -P -m prefetch.jobs.worker JOB`` in a new session, stdin from /dev/null,
    stdout and stderr into ``log_fd``, no other descriptor (as ``subprocess``'s
    ``close_fds``: an inheritable one the caller's shell left open, a notebook cell's pipe,
    would keep that cell waiting); the worker moves to ``directory`` itself. Its pid.

    A log on descriptor 0, 1 or 2 (a caller without stdin opens it as 0, which the first
    action replaces with /dev/null) is first copied above them, as ``subprocess`` does."""
    if log_fd <= 2:
        import fcntl

        high = fcntl.fcntl(log_fd, fcntl.F_DUPFD_CLOEXEC, 3)
        try:
            return _spawn_worker(job_id, high, env, directory)
        finally:
            os.close(high)
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(3, 256)
    limit = os.sysconf("SC_OPEN_MAX")  # (the soft limit: glibc refuses a close action above it, EBADF)
    above: list[int] = []  # inheritable descriptors above it (a limit lowered after they were opened)
    for fd in fds:
        if fd > 2 and fd != log_fd:
            try:
                if os.get_inheritable(fd):
                    if fd >= limit:
                        above.append(fd)
                    else:
                        actions.append((os.POSIX_SPAWN_CLOSE, fd))
            except OSError:  # (listdir's own descriptor, closed since)
                pass
    env = dict(env, **{WORKER_DIR_ENV: directory})
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = _absolute_pythonpath(env["PYTHONPATH"], directory)
    for fd in above:  # kept from the worker for the spawn alone, as given back after
        os.set_inheritable(fd, False)
    try:
        return os.posix_spawn(sys.executable, [sys.executable, "-P", "-m", "prefetch.jobs.worker", job_id], env,
                              file_actions=actions, setsid=True)
    finally:
        for fd in above:
            os.set_inheritable(fd, True)


def _absolute_pythonpath(value: str, fallback: str) -> str:
    """``PYTHONPATH`` with its relative entries (an empty one is the directory) made absolute
    against this process's directory, where they point for it, or ``fallback`` when that was
    removed (the worker starts in the caller's directory, and Python cannot start in a
    removed one with a relative entry: "Fatal Python error: error evaluating path")."""
    entries = value.split(os.pathsep)
    if all(os.path.isabs(entry) for entry in entries):
        return value
    try:
        base = os.getcwd()
    except OSError:
        base = fallback
    return os.pathsep.join(entry if os.path.isabs(entry) else os.path.join(base, entry) for entry in entries)


def _forget_child(pid: int, reap=None) -> None:
    # The launcher never waits for the worker, but in a long-lived process (the
    # Python API in a notebook kernel) an unreaped worker would linger as a
    # zombie: reap it from a daemon thread. (Liveness checks treat zombies as dead.)
    import threading

    threading.Thread(target=reap or _wait_for, args=() if reap else (pid,), name=f"prefetch-reap-{pid}",
                     daemon=True).start()


def _wait_for(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # (reaped elsewhere: a SIGCHLD handler of the host process)
        pass
