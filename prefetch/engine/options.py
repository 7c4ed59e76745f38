"""What a transfer is asked (:class:`TransferOptions`, with the ``PREFETCH_*`` tuning
variables) and what it reports (:class:`TransferResult`)."""

from __future__ import annotations

import os
from dataclasses import field

from prefetch.model.lean import dataclass
from prefetch.net.http import Timeouts


@dataclass(frozen=True)
class TransferOptions:
    """Knobs for one transfer. Defaults suit a slow, throttled route abroad."""

    connections: int | None = None  # None: automatic (grow while throughput grows)
    max_connections: int = 32  # cap per file; the ramp reaches it only while connections pay
    initial_connections: int = 8
    # On a short route, the probe's connection is watched alone first (a few hundredths of a
    # second): one connection this fast (bytes/s) means the machine, not the network, is the
    # limit, and the ramp starts from one instead of initial_connections. 0: never (the
    # default; a polite background job sets POLITE_ONE_CONNECTION_RATE, jobs/worker.py).
    one_connection_rate: float = 0.0
    min_split: int = 512 << 10  # never split into pieces smaller than this (nor than latency x rate)
    chunk_size: int = 512 << 10  # the largest read (a read returns what has arrived)
    # Each request asks for a closed range: the first (size unknown) for first_request
    # bytes, then a share of what is left between request_min and request_max. With one
    # connection (--connections 1, or one stream) a request asks for the whole rest.
    first_request: int = 1 << 20
    request_min: int = 1 << 20
    request_max: int = 64 << 20
    # Give up on a source after this many seconds without a byte (a third of it when
    # it does not resolve, refuses connections or answers a web page): --timeout.
    timeout: float = 30.0
    timeouts: Timeouts = field(default_factory=Timeouts)  # per attempt: connect, read (and the whole head)
    stall_window: float = 20.0  # seconds ...
    stall_min_rate: float = 1024.0  # ... below this many bytes/s => reconnect
    max_attempts: int = 8  # consecutive failures without progress before giving up
    source_failures: int = 3  # failures before a source is dropped (if others remain)
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    retry_after_cap: float = 120.0
    demote_window: float = 2.0  # a source's rate per connection is judged over this long ...
    demote_ratio: float = 4.0  # ... and it is demoted when the fastest does this many times better
    revive_after: float = 60.0  # a source dropped as unreachable (DNS, refused) is tried again after this long
    max_restarts: int = 3  # remote changed this often => IntegrityError
    long_route: float = 0.04  # a first answer slower than this (seconds) means a long route: ...
    long_route_connections: int = 32  # ... open this many connections together, ...
    piece_size: int = 1 << 20  # ... and request at most this much at a time
    # While a probe's answer is that slow in coming, open up to this many of those connections
    # ahead (TCP/TLS, no request: engine/preconnect.py); 0: never. PREFETCH_PRECONNECT.
    preconnect: int = 31
    ramp_interval: float = 0.1  # the ramp judges each step over this long (after it settles)
    ramp_gain: float = 1.15  # ... and doubles again only if the rate grew by this factor
    state_interval: float = 0.5
    progress_interval: float = 0.25
    preallocate: bool = True
    # Plain-HTTP bodies move from the socket to the file with splice (Linux; net/splice.py);
    # PREFETCH_SPLICE=0 reads them through Python's buffer instead.
    splice: bool = True
    sync_data: bool = True  # fdatasync the .part before a state save that records new ranges
    # Also save (and so flush) once this many bytes arrived since the last flush, not only every
    # state_interval: on a fast link the disk writes while the rest arrives, and the final
    # fdatasync waits for the last few MiB, not the whole file. 0: by time only. PREFETCH_SYNC_EVERY.
    sync_every: int = 32 << 20
    # False: a file of at most resume_state.SMALL_FILE bytes, complete before its first state
    # save, gets no record (its .part is still flushed). Only for a caller that renames the .part
    # into place right after the transfer; one with slow work in between (extracting an archive)
    # keeps the record, so a kill there costs no download.
    small_record: bool = True
    # Connections to one host from all the files of a run together (engine/hosts.py); a 429/503
    # from the host lowers it. PREFETCH_HOST_CONNECTIONS, --host-connections.
    host_connections: int = 32  # as many as one file may open (max_connections): one big file loses nothing
    # After this many seconds without a 429/503, a cap the server set (engine/retry.py,
    # engine/hosts.py) is tried one connection higher, then sooner and by more while raises hold
    # (engine/recovery.py); 0: a cap holds for the run. PREFETCH_CAP_RETRY.
    cap_retry: float = 60.0
    # Where the hosts' slot files are: their caps then hold for all of this user's processes on the
    # machine together (engine/shared_budget.py; the flow sets <state dir>/slots). None: this run's own.
    slots_dir: str | None = field(default=None, compare=False)
    # prefetch.engine.hosts.Hosts shared by the transfers of one run (None: this transfer on its own).
    hosts: object | None = field(default=None, repr=False, compare=False)
    # Extra request headers for every request of this transfer (--header); secrets maybe:
    # never logged, never in the state file, never in repr().
    headers: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # PREFETCH_RESOLVE: host -> address (None: the name does not resolve), or None to read
    # it from os.environ where connections are made.
    resolve: dict[str, str | None] | None = field(default=None, compare=False)
    # Something thread-safe that keeps a total rate (--limit-rate: prefetch.engine.ratelimit.RateLimiter),
    # or None: each read books ``wait(n)`` first (n <= its ``chunk``), then ``refund``s what it did not get.
    limiter: object | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "TransferOptions":
        """Defaults, then ``PREFETCH_*`` tuning variables, then ``overrides``."""
        env = os.environ if env is None else env
        values: dict = {}
        for key, name, kind in _ENV_KNOBS:
            if env.get(name):
                try:
                    values[key] = kind(env[name])
                    if values[key] != values[key]:  # nan: every comparison with it is False
                        raise ValueError
                except ValueError:
                    from prefetch.errors import UsageError

                    raise UsageError(f"{name}={env[name]!r} is not a valid {kind.__name__}") from None
                positive = key in _POSITIVE_KNOBS
                # (counts, sizes, rates, times: never negative)
                if kind in (float, int) and (values[key] < 0 or positive and values[key] == 0):
                    from prefetch.errors import UsageError

                    raise UsageError(f"{name}={env[name]!r}: must be {'more than 0' if positive else '0 or more'}")
        if env.get("PREFETCH_RESOLVE"):
            from prefetch.net.open_socket import resolve_overrides

            values["resolve"] = resolve_overrides(env)
        values.update({k: v for k, v in overrides.items() if v is not None})
        read = values.pop("read_timeout", None)
        connect = values.pop("connect_timeout", None)
        timeout = values.get("timeout")
        if timeout is not None and not timeout > 0:  # (nan too: click's FloatRange lets it through)
            from prefetch.errors import UsageError

            raise UsageError(f"--timeout must be more than 0 seconds, got {timeout:g}")
        # inf, or more than a socket's timeout holds (an OverflowError in settimeout): in effect, never.
        if timeout is not None:
            timeout = values["timeout"] = min(timeout, LONGEST_TIMEOUT)
        read = None if read is None else min(read, LONGEST_TIMEOUT)
        connect = None if connect is None else min(connect, LONGEST_TIMEOUT)
        if values.get("max_attempts") is not None and values["max_attempts"] < 0:
            from prefetch.errors import UsageError

            raise UsageError(f"--retries must be 0 or more, got {values['max_attempts']}")
        if read is not None or connect is not None or timeout is not None:
            # Per attempt: a third of --timeout to connect, half of it for the head and each read.
            base = Timeouts() if timeout is None else Timeouts(connect=timeout / 3, read=timeout / 2)
            values["timeouts"] = Timeouts(
                connect=connect if connect is not None else base.connect,
                read=read if read is not None else base.read,
            )
        return cls(**values)


LONGEST_TIMEOUT = 1e9  # seconds (31 years): longer ones (inf) are read as this
POLITE_ONE_CONNECTION_RATE = 200e6  # bytes/s: a polite background job's one_connection_rate

# Knobs a 0 makes meaningless: a socket timeout of 0 is a non-blocking socket, a window of 0 a division by it.
_POSITIVE_KNOBS = ("read_timeout", "connect_timeout", "demote_window")
_ENV_KNOBS = [
    ("read_timeout", "PREFETCH_READ_TIMEOUT", float),
    ("connect_timeout", "PREFETCH_CONNECT_TIMEOUT", float),
    ("stall_window", "PREFETCH_STALL_WINDOW", float),
    ("stall_min_rate", "PREFETCH_STALL_MIN_RATE", float),
    ("max_attempts", "PREFETCH_RETRIES", int),
    ("timeout", "PREFETCH_TIMEOUT", float),
    ("backoff_base", "PREFETCH_BACKOFF", float),
    ("backoff_cap", "PREFETCH_BACKOFF_CAP", float),
    ("retry_after_cap", "PREFETCH_RETRY_AFTER_CAP", float),
    ("min_split", "PREFETCH_MIN_SPLIT", int),
    ("first_request", "PREFETCH_FIRST_REQUEST", int),
    ("request_min", "PREFETCH_REQUEST_MIN", int),
    ("request_max", "PREFETCH_REQUEST_MAX", int),
    ("demote_window", "PREFETCH_DEMOTE_WINDOW", float),
    ("revive_after", "PREFETCH_REVIVE_AFTER", float),
    ("max_connections", "PREFETCH_MAX_CONNECTIONS", int),
    ("sync_data", "PREFETCH_SYNC", lambda v: v.strip().lower() not in ("0", "no", "false", "off")),  # never raises
    ("sync_every", "PREFETCH_SYNC_EVERY", int),
    ("long_route", "PREFETCH_LONG_ROUTE", float),
    ("one_connection_rate", "PREFETCH_ONE_CONNECTION_RATE", float),
    ("long_route_connections", "PREFETCH_LONG_ROUTE_CONNECTIONS", int),
    ("piece_size", "PREFETCH_PIECE_SIZE", int),
    ("preconnect", "PREFETCH_PRECONNECT", int),
    ("host_connections", "PREFETCH_HOST_CONNECTIONS", int),
    ("cap_retry", "PREFETCH_CAP_RETRY", float),
    ("splice", "PREFETCH_SPLICE", lambda v: v.strip().lower() not in ("0", "no", "false", "off")),
    ("preallocate", "PREFETCH_PREALLOCATE", lambda v: v.strip().lower() not in ("0", "no", "false", "off")),
]


@dataclass
class TransferResult:
    """What one transfer did."""

    size: int
    digest: str | None  # hex digest of the whole file, when an algorithm was asked for
    algorithm: str | None
    downloaded: int  # body bytes received this run
    reused: int  # bytes already on disk from an earlier run
    elapsed: float
    connections: int  # most connections used at once
    restarts: int
    sources_dropped: list[str]
    served: dict[str, int] = field(default_factory=dict)  # source URL -> bytes of the file it delivered
    part_ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the .part written: the name must still hold it
