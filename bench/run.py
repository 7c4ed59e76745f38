#!/usr/bin/env python3
"""Benchmark ``prefetch get`` against wget, curl and aria2c on a loopback nginx.

    python bench/run.py                 # 200 MiB file, 3 rounds (a few minutes)
    python bench/run.py --quick         # 50 MiB, 1 round: a smoke run
    python bench/run.py --tools prefetch,aria2c --scenarios throttled

What it does:

* writes a random file (``--size-mib``, default 200) into a temp dir and computes its sha256;
* starts nginx twice on 127.0.0.1 serving that dir: ``throttled`` (``limit_rate 10m``, i.e.
  10 MiB/s for *each* connection, the usual CDN case) and ``unthrottled``;
* per scenario and round, runs every tool once, in an order that rotates each round:
  ``wget -q -O out URL``, ``curl -s -o out URL``,
  ``aria2c -x16 -s16 -k1M ... URL``, ``python -m prefetch get URL -o out -q``, the same
  with ``--sha256 HEX`` (download + verify), ``prefetch-nohash`` (the same CLI run with
  hashing forced off: download alone) and ``prefetch-x16`` (``--connections 16``: aria2c's
  connection count, like for like); outputs and prefetch's state are deleted between
  runs and every output is checked byte for byte (by sha256, outside the timed part);
* measures each run's wall time and peak RSS (GNU ``/usr/bin/time -f %M`` when present,
  else ``wait4``'s ru_maxrss, which includes this process's RSS as a floor), counts the
  HTTP requests each run made (nginx's access log), times CLI start-up
  (``prefetch --help`` / ``prefetch status`` against ``python -c pass``);
* prints tables (markdown, ready to paste), the issue's targets with MET / NOT MET, and
  writes everything to ``bench/out/latest.json``.

Nothing is dropped from the page cache: the served file is hot in memory (nginx serves it
with sendfile) and outputs land in the page cache too, so the numbers are about the
clients' own overhead, not the disk. Tools run with HOME and PREFETCH_HOME pointing into
the temp dir (no ~/.wgetrc, ~/.curlrc or user state) and with proxies unset.

Needs nginx, wget, curl and aria2c (Debian: ``apt-get install -y nginx wget curl aria2``);
a missing client is reported and skipped. Linux only (wait4, /proc).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.latency_proxy import LatencyProxy  # noqa: E402 - after the sys.path insert above
from tests.nginx import NginxServer, nginx_binary  # noqa: E402

MIB = 1 << 20
FILE_NAME = "bench.bin"
TOOLS = ("wget", "curl", "curl+sync", "aria2c", "prefetch", "prefetch+sha256", "prefetch-nohash", "prefetch-x16", "prefetch-base")
DEFAULT_TOOLS = TOOLS[:-1]  # prefetch-base runs with --baseline DIR only
BASELINE: dict[str, str] = {}  # --baseline: {"dir": a checkout of another prefetch version}

# "Download alone" for prefetch: the same CLI path with the hash-while-downloading forced off,
# so the --sha256 comparison stays meaningful whether or not plain `get URL` hashes by default.
NOHASH_DRIVER = """\
import dataclasses, sys
import prefetch.flow.files as fetch
real = fetch.download_to_part
def no_hash(**kw):
    kw["algorithm"] = None
    return dataclasses.replace(real(**kw), digest="not-computed")
fetch.download_to_part = no_hash
from prefetch.cli import run
sys.argv[0] = "prefetch"
run()
"""
RUN_TIMEOUT = 600.0
# prefetch-base: `prefetch get` imported from another checkout (argv[1]), for A/B in one run.
BASE_DRIVER = """\
import sys
sys.path.insert(0, sys.argv.pop(1))
import prefetch.cli as cli
sys.argv[0] = "prefetch"
getattr(cli, "run", cli.main)()  # the process entry point of that version (run() skips the teardown)
"""


@dataclass(frozen=True)
class Scenario:
    """One server setup: nginx's limits, and a latency proxy in front when ``rtt``."""

    name: str
    limit_rate: str | None = None  # per connection (nginx syntax)
    rtt: float | None = None  # seconds of round trip added by tests/latency_proxy.py
    limit_conn: int | None = None  # connections per client; more get 503
    pace: float | None = None  # bytes/s per connection, paced by the proxy with no burst
    max_open: int | None = None  # connections per client the proxy serves at once; more get 503
    route: bool = False  # the smaller "route" file (--route-size-mib), slow single-connection tools once
    big: bool = False  # the big file (--big-size-mib, 1 GiB): start-up amortized


def scenarios(args) -> dict[str, Scenario]:
    return {
        "throttled": Scenario("throttled", limit_rate=args.limit_rate),
        "unthrottled": Scenario("unthrottled"),
        "unthrottled1g": Scenario("unthrottled1g", big=True),
        "rtt50": Scenario("rtt50", limit_rate="1m", rtt=0.05, route=True),
        "rtt200": Scenario("rtt200", limit_rate="1m", rtt=0.2, route=True),
        "rtt400": Scenario("rtt400", limit_rate="1m", rtt=0.4, route=True),
        # nginx's limit_rate grants each request a second's worth at once, so a client of many
        # short requests outruns it and size / rate is no floor; the proxy paces exactly instead
        # and caps the connections itself (nginx's limit_conn counts a request only while nginx
        # is still sending it, which the proxy's buffering cuts short).
        "capped": Scenario("capped", max_open=4, rtt=0.03, pace=CAPPED_PACE, route=True),
    }


SCENARIOS = ("throttled", "unthrottled", "unthrottled1g", "rtt50", "rtt200", "rtt400", "capped")
ROUTE_FILE = "route.bin"
BIG_FILE = "big.bin"
CAPPED_PACE = 2 * MIB  # capped: bytes/s per connection, paced by the latency proxy
CAPPED_FLOOR_RATE = 4 * CAPPED_PACE  # 4 connections at the pace: the physical floor is size / this
SLOW_TOOLS = ("wget", "curl")  # one connection: on a route scenario they run in round 1 only
ROUTE_SKIP = ("prefetch+sha256", "prefetch-nohash", "curl+sync")  # hashing and flush costs show on the loopback rows
# A bare click command: the floor for CLI start-up (click's own import).
CLICK_DRIVER = "import click\n@click.command()\ndef main():\n    pass\nmain()\n"

# The issue's targets: (key, description, limit). A ratio is MET when <= limit.
TARGETS = [
    ("rtt200_prefetch_over_aria2c", "200 ms, 1 MiB/s per connection: prefetch / aria2c -x16", 0.6),
    ("rtt50_prefetch_over_aria2c", "50 ms, 1 MiB/s per connection: prefetch / aria2c -x16", 0.7),
    ("rtt400_prefetch_over_aria2c", "400 ms, 1 MiB/s per connection: prefetch / aria2c -x16", 0.6),
    ("capped_prefetch_over_floor", "capped mirror (4 per client at 2 MiB/s): prefetch / physical floor", 1.03),
    ("throttled_prefetch_over_aria2c", "throttled: prefetch / aria2c -x16", 0.9),
    ("throttled_prefetch_over_wget", "throttled: prefetch / wget", 0.1),
    ("unthrottled_prefetch_over_curl", "unthrottled: prefetch / curl", 1.0),
    ("unthrottled1g_prefetch_over_curl", "unthrottled 1 GiB: prefetch / curl", 0.4),
    ("throttled_sha256_over_nohash", "throttled: prefetch --sha256 / prefetch without hashing", 1.1),
    ("unthrottled_sha256_over_nohash", "unthrottled: prefetch --sha256 / prefetch without hashing", 1.1),
    ("throttled_cpu_prefetch_over_aria2c", "throttled: prefetch CPU s / aria2c CPU s", 1.2),
    ("unthrottled_cpu_prefetch_over_aria2c", "unthrottled: prefetch CPU s / aria2c CPU s", 1.2),
    ("served_max_prefetch", "bytes served by nginx / file size, worst prefetch row", 1.05),
    ("peak_rss_mib", "prefetch peak RSS (MiB)", 80.0),
    ("help_over_click", "prefetch --help / bare click --help", 1.3),
    ("status_over_click", "prefetch status / bare click --help", 1.5),
]


@dataclass
class Run:
    scenario: str
    tool: str
    round: int
    seconds: float
    returncode: int
    max_rss_kib: int
    cpu_s: float  # user + sys of the process (and its children)
    requests: int | None
    ok: bool  # exit 0 and the output is byte-identical
    served: int | None = None  # body bytes nginx sent for this run (its timing log)
    note: str = ""


@dataclass
class Summary:
    scenario: str
    tool: str
    runs: int
    failed: int
    median_s: float | None
    mb_per_s: float | None
    min_s: float | None
    max_s: float | None
    requests: float | None
    max_rss_mib: float | None
    cpu_s: float | None = None  # median user + sys
    served_x: float | None = None  # the worst run's bytes served / file size


@dataclass
class Startup:
    name: str
    command: list[str]
    median_s: float | None
    runs: list[float] = field(default_factory=list)
    error: str | None = None


# ---------------------------------------------------------------------------- helpers


def make_file(path: Path, size: int) -> str:
    """Write ``size`` random bytes to ``path``; return their sha256."""
    digest = hashlib.sha256()
    with path.open("wb") as f:
        left = size
        while left:
            block = os.urandom(min(left, 4 * MIB))
            digest.update(block)
            f.write(block)
            left -= len(block)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(4 * MIB):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def gnu_time() -> str | None:
    """/usr/bin/time when it is GNU time (it reports the command's own peak RSS)."""
    path = "/usr/bin/time"
    if not os.access(path, os.X_OK):
        return None
    try:
        proc = subprocess.run([path, "-f", "%M", "-o", os.devnull, "true"], check=False, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if proc.returncode == 0 else None


def rss_method() -> str:
    return ("/usr/bin/time -f %M" if gnu_time() else
            "wait4 ru_maxrss (includes the forking bench process's RSS, ~30 MiB floor)")


def run_measured(cmd: list[str], *, env: dict, cwd: Path, log: Path, timeout: float = RUN_TIMEOUT
                 ) -> tuple[float, int, int, float]:
    """Run ``cmd``; return (wall seconds, exit code, peak RSS in KiB of that process, CPU seconds).

    CPU seconds are user + sys from ``wait4`` (they include the command's children, and
    GNU time's own few milliseconds when it wraps the command).

    Peak RSS comes from GNU time when present: ``wait4``'s ru_maxrss of a child forked
    from this (large) Python process starts at this process's RSS, because Linux keeps
    the pre-exec high-water mark.
    """
    rss_file = log.with_suffix(".rss")
    wrapped = [gnu_time(), "-f", "%M", "-o", str(rss_file), *cmd] if gnu_time() else cmd
    with log.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=cwd)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss = usage.ru_maxrss  # Linux: KiB
    if gnu_time():
        try:
            rss = int(rss_file.read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            pass
    return elapsed, proc.returncode, rss, usage.ru_utime + usage.ru_stime


def tool_env(work: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
           and not k.startswith("PREFETCH_")}
    env["HOME"] = str(work / "home")
    env["XDG_CONFIG_HOME"] = str(work / "home" / ".config")
    env["PREFETCH_HOME"] = str(work / "prefetch-home")
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def prefetch_cli() -> list[str]:
    """The console script users type, from this interpreter's environment, else -m."""
    script = Path(sys.executable).parent / "prefetch"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("prefetch")
    return [found] if found else [sys.executable, "-m", "prefetch"]


def compile_prefetch() -> None:
    """Byte-compile the prefetch package being measured, as ``pip install`` does.

    An editable install (or PYTHONDONTWRITEBYTECODE=1, set on some machines) would
    otherwise recompile prefetch's sources on every run and time the compiler.
    """
    import importlib.util

    spec = importlib.util.find_spec("prefetch")
    for location in (spec.submodule_search_locations or []) if spec else []:
        subprocess.run([sys.executable, "-m", "compileall", "-q", location], check=False,
                       stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})


def tool_command(tool: str, url: str, out: Path, sha256: str) -> list[str]:
    if tool == "wget":
        return ["wget", "-q", "-O", str(out), url]
    if tool == "curl":
        return ["curl", "-s", "-o", str(out), url]
    if tool == "curl+sync":  # curl, then its file flushed to the disk (`sync --data`: fdatasync), which
        # prefetch does before it renames a file into place and curl never does: the durability's cost
        return ["sh", "-c", 'curl -s -o "$1" "$2" && sync --data "$1"', "sh", str(out), url]
    if tool == "aria2c":
        return ["aria2c", "-x16", "-s16", "-k1M", "--allow-overwrite=true", "--auto-file-renaming=false",
                "-q", "-d", str(out.parent), "-o", out.name, url]
    if tool == "prefetch":
        return [sys.executable, "-m", "prefetch", "get", url, "-o", str(out), "-q"]
    if tool == "prefetch-nohash":
        return [sys.executable, "-c", NOHASH_DRIVER, "get", url, "-o", str(out), "-q"]
    if tool == "prefetch+sha256":
        return [sys.executable, "-m", "prefetch", "get", url, "-o", str(out), "-q", "--sha256", sha256]
    if tool == "prefetch-base":  # the same command, another version of prefetch (--baseline DIR)
        return [sys.executable, "-c", BASE_DRIVER, BASELINE["dir"], "get", url, "-o", str(out), "-q"]
    if tool == "prefetch-x16":  # like for like with aria2c -x16: its connection count, fixed
        return [sys.executable, "-m", "prefetch", "get", url, "-o", str(out), "-q", "--connections", "16"]
    raise ValueError(tool)


def tool_available(tool: str) -> bool:
    return tool.startswith("prefetch") or shutil.which(tool.split("+")[0]) is not None


def clean_outputs(out: Path, env: dict) -> None:
    for p in (out, out.with_name(out.name + ".part"), out.with_name(out.name + ".part.json"),
              out.with_name(out.name + ".aria2")):
        p.unlink(missing_ok=True)
    for p in out.parent.glob(out.name + ".*"):
        p.unlink(missing_ok=True)
    shutil.rmtree(env["PREFETCH_HOME"], ignore_errors=True)


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def served_bytes(timing_log: Path, skip: int) -> int:
    """Body bytes nginx sent in the responses logged after the first ``skip`` lines."""
    try:
        lines = timing_log.read_text().splitlines()[skip:]
    except OSError:
        return 0
    return sum(int(line.split(" ")[3]) for line in lines if line.count(" ") >= 4)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def first_line(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else "n/a"


def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    try:
        from importlib.metadata import version

        prefetch_version = version("prefetch-datasets")
    except Exception:  # noqa: BLE001
        prefetch_version = "n/a"
    commit = first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           check=False, capture_output=True, text=True).stdout.strip()
    nginx = nginx_binary()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "prefetch": prefetch_version,
        "commit": commit + ("+dirty" if dirty else ""),
        "nginx": first_line([nginx, "-v"]) if nginx else "n/a",
        "wget": first_line(["wget", "--version"]),
        "curl": first_line(["curl", "--version"]),
        "aria2c": first_line(["aria2c", "--version"]),
    }


# ---------------------------------------------------------------------------- phases


def idle(proxy, limit: float = 2.0) -> None:
    """Wait (at most ``limit`` seconds) until ``proxy`` has seen every connection of the run before
    it close. It passes a client's close on after half a round trip and its loop's turn: on a
    loaded machine the last tool's connections still counted towards the capped row's 4 when the
    next tool connected, and their 503s (taken as a cap of 1) made one prefetch run 26 s."""
    until = time.monotonic() + limit
    while proxy is not None and proxy.open and time.monotonic() < until:
        time.sleep(0.01)


def bench_downloads(*, servers: dict[str, tuple[Scenario, str, int, str, Path, object]], tools: list[str],
                    rounds: int, work: Path, env: dict, prefetch_env: dict, progress) -> list[Run]:
    """Every tool on every scenario; ``servers`` maps a scenario to (it, url, size, sha256, access
    log, its latency proxy or None)."""
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    runs: list[Run] = []
    for name, (scenario, url, size, sha256, access_log, proxy) in servers.items():
        out = work / "out" / url.rsplit("/", 1)[-1]
        out.parent.mkdir(exist_ok=True)
        for r in range(rounds):
            order = tools[r % len(tools):] + tools[:r % len(tools)]  # rotate: no tool always first
            for tool in order:
                if scenario.route and (tool in ROUTE_SKIP or (tool in SLOW_TOOLS and r)):
                    continue  # one connection at 1 MiB/s: minutes per run, and no variance worth it
                clean_outputs(out, env)
                idle(proxy)  # (each tool starts on a mirror that has no connection of the last one open)
                before = count_lines(access_log)
                timing = access_log.with_name("timing.log")
                served_before = count_lines(timing)
                log = logs / f"{name}-{tool}-{r}.log"
                run_env = {**env, **prefetch_env} if tool.startswith("prefetch") else env
                seconds, code, rss, cpu = run_measured(tool_command(tool, url, out, sha256), env=run_env,
                                                       cwd=work, log=log)
                requests = count_lines(access_log) - before
                served = served_bytes(timing, served_before)
                ok, note = code == 0, ""
                if code != 0:
                    note = f"exit {code}: " + " ".join(log.read_text(errors="replace").split())[:200]
                elif not out.is_file() or out.stat().st_size != size:
                    ok, note = False, f"output has {out.stat().st_size if out.exists() else 'no'} bytes"
                elif sha256_of(out) != sha256:
                    ok, note = False, "output differs from the served file"
                run = Run(name, tool, r + 1, seconds, code, rss, cpu, requests, ok, served=served, note=note)
                runs.append(run)
                progress(f"  {name:11} round {r + 1}/{rounds} {tool:16} {seconds:7.2f}s "
                         f"{size / seconds / 1e6:8.1f} MB/s  cpu {cpu:5.2f}s  rss {rss / 1024:6.1f} MiB  "
                         f"req {requests:3}  served {served / size:5.3f}x  {'ok' if ok else 'FAILED ' + note}")
        clean_outputs(out, env)
    return runs


def bench_startup(*, env: dict, work: Path, repeats: int, progress) -> list[Startup]:
    """Median wall time of each start-up command; the commands alternate, so load from
    anything else on the machine hits them alike. One warm-up run each is not counted."""
    cli = prefetch_cli()
    results = [
        Startup("python -c pass", [sys.executable, "-c", "pass"], None),
        Startup("click --help", [sys.executable, "-c", CLICK_DRIVER, "--help"], None),
        Startup("prefetch --help", [*cli, "--help"], None),
        Startup("prefetch status", [*cli, "status"], None),
    ]
    log = work / "logs" / "startup.log"
    log.parent.mkdir(exist_ok=True)
    for i in range(repeats + 1):
        for item in results:
            if item.error:
                continue
            seconds, code, _, _ = run_measured(item.command, env=env, cwd=work, log=log, timeout=60)
            if code != 0:
                lines = log.read_text(errors="replace").strip().splitlines()
                item.error = f"exit {code}: {lines[-1] if lines else 'no output'}"
            elif i:
                item.runs.append(seconds)
    for item in results:
        item.median_s = None if item.error else median(item.runs)
        shown = f"{item.median_s * 1000:.0f} ms" if item.median_s else f"n/a ({item.error})"
        progress(f"  {item.name:16} {shown}")
    return results


def summarize(runs: list[Run], sizes: dict[str, int]) -> list[Summary]:
    out = []
    for scenario in dict.fromkeys(r.scenario for r in runs):
        for tool in dict.fromkeys(r.tool for r in runs if r.scenario == scenario):
            mine = [r for r in runs if r.scenario == scenario and r.tool == tool]
            good = [r for r in mine if r.ok]
            secs = [r.seconds for r in good]
            med = median(secs)
            reqs = [r.requests for r in good if r.requests is not None]
            size = sizes[scenario]
            out.append(Summary(
                scenario=scenario, tool=tool, runs=len(mine), failed=len(mine) - len(good),
                median_s=med, mb_per_s=size / med / 1e6 if med else None,
                min_s=min(secs) if secs else None, max_s=max(secs) if secs else None,
                requests=median(reqs) if reqs else None,
                max_rss_mib=max(r.max_rss_kib for r in mine) / 1024 if mine else None,
                cpu_s=median([r.cpu_s for r in good]),
                served_x=max((r.served or 0) / size for r in good) if good else None,
            ))
    return out


def compute_ratios(summaries: list[Summary], startup: list[Startup], sizes: dict[str, int]) -> dict[str, float | None]:
    med = {(s.scenario, s.tool): s.median_s for s in summaries}

    def ratio(a, b):
        x, y = med.get(a), med.get(b)
        return x / y if x and y else None

    ratios: dict[str, float | None] = {}
    cpu = {(s.scenario, s.tool): s.cpu_s for s in summaries}
    for scenario in ("throttled", "unthrottled", "unthrottled1g"):
        a, b = cpu.get((scenario, "prefetch")), cpu.get((scenario, "aria2c"))
        ratios[f"{scenario}_cpu_prefetch_over_aria2c"] = a / b if a and b else None
    capped = med.get(("capped", "prefetch"))
    ratios["capped_prefetch_over_floor"] = capped / (sizes["capped"] / CAPPED_FLOOR_RATE) \
        if capped and "capped" in sizes else None
    served = [s.served_x for s in summaries if s.tool.startswith("prefetch") and s.tool != "prefetch-base"
              and s.served_x]
    ratios["served_max_prefetch"] = max(served) if served else None
    for scenario in SCENARIOS:
        for other in ("aria2c", "wget", "curl", "curl+sync"):
            ratios[f"{scenario}_prefetch_over_{other}"] = ratio((scenario, "prefetch"), (scenario, other))
        ratios[f"{scenario}_sha256_over_plain"] = ratio((scenario, "prefetch+sha256"), (scenario, "prefetch"))
        ratios[f"{scenario}_sha256_over_nohash"] = ratio((scenario, "prefetch+sha256"), (scenario, "prefetch-nohash"))
        ratios[f"{scenario}_aria2c_over_wget"] = ratio((scenario, "aria2c"), (scenario, "wget"))
        ratios[f"{scenario}_x16_over_aria2c"] = ratio((scenario, "prefetch-x16"), (scenario, "aria2c"))
        ratios[f"{scenario}_prefetch_over_base"] = ratio((scenario, "prefetch"), (scenario, "prefetch-base"))
    rss = [s.max_rss_mib for s in summaries if s.tool.startswith("prefetch") and s.max_rss_mib]
    ratios["peak_rss_mib"] = max(rss) if rss else None
    by_name = {s.name: s.median_s for s in startup}
    for floor, suffix in (("python -c pass", "python"), ("click --help", "click")):
        base = by_name.get(floor)
        for key, name in ((f"help_over_{suffix}", "prefetch --help"), (f"status_over_{suffix}", "prefetch status")):
            value = by_name.get(name)
            ratios[key] = value / base if value and base else None
    return ratios


# ---------------------------------------------------------------------------- output


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def render(*, machine: dict, args, size: int, summaries: list[Summary], startup: list[Startup],
           ratios: dict, targets: list[dict]) -> str:
    lines = [
        (f"prefetch benchmark: {size // MIB} MiB file (loopback rows), {args.route_size_mib} MiB (route rows), "
        f"{args.rounds} round(s), nginx on 127.0.0.1 "
        f"(throttled: limit_rate {args.limit_rate} per connection; rttN: a proxy adding N ms of round trip "
        f"in front of limit_rate 1m per connection; capped: 4 connections per client (503 beyond), each paced at 2 MiB/s by the proxy, 30 ms round trip)"
        + (f"; prefetch env: {' '.join(args.prefetch_env)}" if args.prefetch_env else "")),
        f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB RAM, {machine['os']}",
        (f"python {machine['python']}, prefetch {machine['prefetch']} ({machine['commit']}); {machine['nginx']}; "
        f"{machine['wget']}; {machine['curl'].split(' (')[0]}; {machine['aria2c']}"),
        f"page cache: not dropped (the served file and the outputs stay in memory); peak RSS: {rss_method()}",
        f"load average (1 min) before / after: {machine.get('load_before', 'n/a')} / {machine.get('load_after', 'n/a')}",
        "",
        "| scenario | tool | median s | MB/s | min-max s | requests | CPU s | peak RSS MiB | served x | failed |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.scenario} | {s.tool} | {fmt(s.median_s, '.2f')} | {fmt(s.mb_per_s, '.1f')} | "
            f"{fmt(s.min_s, '.2f')}-{fmt(s.max_s, '.2f')} | {fmt(s.requests, '.0f')} | {fmt(s.cpu_s, '.2f')} | "
            f"{fmt(s.max_rss_mib, '.1f')} | {fmt(s.served_x, '.3f')} | {s.failed}/{s.runs} |"
        )
    lines += ["", "| start-up | median ms | x python -c pass | x bare click --help |", "|---|---:|---:|---:|"]
    base = next((s.median_s for s in startup if s.name == "python -c pass"), None)
    click = next((s.median_s for s in startup if s.name == "click --help"), None)
    for s in startup:
        rel = s.median_s / base if s.median_s and base else None
        rel_click = s.median_s / click if s.median_s and click else None
        ms = f"{s.median_s * 1000:.0f}" if s.median_s else f"n/a ({s.error})"
        lines.append(f"| {s.name} | {ms} | {fmt(rel, '.2f')} | {fmt(rel_click, '.2f')} |")
    lines += ["", "| ratio | value |", "|---|---:|"]
    for scenario in dict.fromkeys(s.scenario for s in summaries):
        for other in ("aria2c", "wget", "curl", "curl+sync"):
            key = f"{scenario}_prefetch_over_{other}"
            if other == "curl+sync" and ratios.get(key) is None:
                continue
            lines.append(f"| {scenario}: prefetch / {other} | {fmt(ratios.get(key), '.2f')} |")
        for key, label in ((f"{scenario}_sha256_over_plain", "prefetch --sha256 / prefetch"),
                           (f"{scenario}_sha256_over_nohash", "prefetch --sha256 / prefetch without hashing")):
            if ratios.get(key) is not None:
                lines.append(f"| {scenario}: {label} | {ratios[key]:.2f} |")
        base = ratios.get(f"{scenario}_prefetch_over_base")
        if base is not None:
            lines.append(f"| {scenario}: prefetch / prefetch-base (--baseline, same run) | {base:.2f} |")
        x16 = ratios.get(f"{scenario}_x16_over_aria2c")
        if x16 is not None:
            lines.append(f"| {scenario}: prefetch --connections 16 / aria2c -x16 (same connection count) | {x16:.2f} |")
    aria = ratios.get("throttled_aria2c_over_wget")
    if aria is not None:
        lines.append(f"| throttled: aria2c / wget (per-connection throttle check) | {aria:.2f} |")
    lines += ["", "| target | limit | measured | |", "|---|---:|---:|---|"]
    for t in targets:
        lines.append(f"| {t['target']} | <= {t['limit']:g} | {fmt(t['measured'], '.2f')} | {t['status']} |")
    if aria is not None and aria > 0.5:
        lines += ["", (f"WARNING: aria2c is not much faster than wget on the throttled server "
                      f"(ratio {aria:.2f}): the throttle does not look per-connection.")]
    lines += ["", ("note: prefetch-nohash is `prefetch get URL -o out -q` with the hash-while-downloading forced off, "
                  "i.e. download alone whatever the default is; prefetch+sha256 downloads and verifies.")]
    return "\n".join(lines)


def judge(ratios: dict) -> list[dict]:
    out = []
    for key, label, limit in TARGETS:
        value = ratios.get(key)
        status = "n/a" if value is None else ("MET" if value <= limit else "NOT MET")
        out.append({"key": key, "target": label, "limit": limit, "measured": value, "status": status})
    return out


# ---------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=None, help="file size in MiB (default 200; 50 with --quick)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per scenario (default 3; 1 with --quick)")
    parser.add_argument("--route-size-mib", type=int, default=None,
                        help="file size of the latency and capped rows (default 48; 16 with --quick)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 50 MiB, 1 round, 3 start-up repeats")
    parser.add_argument("--limit-rate", default="10m", help="nginx per-connection limit_rate of the throttled server")
    parser.add_argument("--big-size-mib", type=int, default=1024, help="file size of the unthrottled1g row")
    parser.add_argument("--baseline", metavar="DIR",
                        help="a checkout of another prefetch version: adds the prefetch-base row (A/B in one run)")
    parser.add_argument("--tools", default=",".join(DEFAULT_TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    parser.add_argument("--startup-repeats", type=int, default=None, help="runs per start-up command (default 10)")
    parser.add_argument("--prefetch-env", action="append", default=[], metavar="NAME=VALUE",
                        help="environment for the prefetch runs, e.g. PREFETCH_MAX_CONNECTIONS=24 (repeatable)")
    parser.add_argument("--json-out", default=str(REPO / "bench" / "out" / "latest.json"), help="where to write the JSON results")
    args = parser.parse_args(argv)
    args.size_mib = args.size_mib or (50 if args.quick else 200)
    args.route_size_mib = args.route_size_mib or (16 if args.quick else 48)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.startup_repeats = args.startup_repeats or (3 if args.quick else 10)
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if args.baseline and "prefetch-base" not in args.tools:
        args.tools.append("prefetch-base")
    if "prefetch-base" in args.tools and not args.baseline:
        parser.error("prefetch-base needs --baseline DIR")
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for item in args.prefetch_env:
        if "=" not in item or not item.split("=", 1)[0]:
            parser.error(f"--prefetch-env wants NAME=VALUE, got {item!r}")
    for t in args.tools:
        if t not in TOOLS:
            parser.error(f"unknown tool {t!r}; choose from {', '.join(TOOLS)}")
    for s in args.scenarios:
        if s not in SCENARIOS:
            parser.error(f"unknown scenario {s!r}; choose from {', '.join(SCENARIOS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if nginx_binary() is None:
        print("bench: nginx not found (apt-get install -y nginx, or set NGINX=/path/to/nginx)", file=sys.stderr)
        return 2

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    tools = [t for t in args.tools if tool_available(t)]
    for t in args.tools:
        if t not in tools:
            progress(f"bench: {t} is not installed; skipped (apt-get install -y {'aria2' if t == 'aria2c' else t})")
    size = args.size_mib * MIB
    if args.baseline:
        BASELINE["dir"] = str(Path(args.baseline).resolve())
    compile_prefetch()
    machine = machine_info()
    machine["load_before"] = round(os.getloadavg()[0], 2)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="prefetch-bench-") as tmp:
        work = Path(tmp)
        root = work / "www"
        root.mkdir()
        (work / "home").mkdir()
        env = tool_env(work)
        progress(f"bench: writing {args.size_mib} MiB and {args.route_size_mib} MiB random files ...")
        files = {False: (FILE_NAME, size, make_file(root / FILE_NAME, size)),
                 True: (ROUTE_FILE, args.route_size_mib * MIB,
                        make_file(root / ROUTE_FILE, args.route_size_mib * MIB))}
        if "unthrottled1g" in args.scenarios:
            big = args.big_size_mib * MIB
            files["big"] = (BIG_FILE, big, make_file(root / BIG_FILE, big))
        servers: dict[str, tuple] = {}
        running: list = []
        try:
            for name in args.scenarios:
                scenario = scenarios(args)[name]
                nginx = NginxServer(root, limit_rate=scenario.limit_rate, limit_conn=scenario.limit_conn).start()
                running.append(nginx)
                url_base = nginx.url.rstrip("/")
                proxy = None
                if scenario.rtt:
                    proxy = LatencyProxy(nginx.port, rtt=scenario.rtt, pace=scenario.pace,
                                         max_open=scenario.max_open).start()
                    running.append(proxy)
                    url_base = proxy.url
                file_name, file_size, file_sha = files["big" if scenario.big else scenario.route]
                servers[name] = (scenario, f"{url_base}/{file_name}", file_size, file_sha, nginx.access_log, proxy)
            progress(f"bench: {', '.join(f'{k} {v[1]}' for k, v in servers.items())}")
            prefetch_env = dict(item.split("=", 1) for item in args.prefetch_env)
            runs = bench_downloads(servers=servers, tools=tools, rounds=args.rounds, work=work, env=env,
                                   prefetch_env=prefetch_env, progress=progress)
        finally:
            for server in reversed(running):
                server.stop()
        sizes = {name: value[2] for name, value in servers.items()}
        progress("bench: start-up times ...")
        startup = bench_startup(env=env, work=work, repeats=args.startup_repeats, progress=progress)
    machine["load_after"] = round(os.getloadavg()[0], 2)
    summaries = summarize(runs, sizes)
    ratios = compute_ratios(summaries, startup, sizes)
    targets = judge(ratios)
    text = render(machine=machine, args=args, size=size, summaries=summaries, startup=startup,
                  ratios=ratios, targets=targets)
    print(text)
    elapsed = time.monotonic() - started
    print(f"\n(benchmark took {elapsed:.0f}s)")
    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "elapsed_s": round(elapsed, 1),
        "machine": machine,
        "config": {"size_mib": args.size_mib, "route_size_mib": args.route_size_mib, "rounds": args.rounds, "limit_rate": args.limit_rate,
                   "tools": tools, "scenarios": args.scenarios, "quick": args.quick,
                   "prefetch_env": args.prefetch_env,
                   "page_cache_dropped": False, "rss_method": rss_method()},
        "summary": [asdict(s) for s in summaries],
        "startup": [asdict(s) for s in startup],
        "ratios": ratios,
        "targets": targets,
        "runs": [asdict(r) for r in runs],
        "table": text,
    }
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    progress(f"bench: results written to {out}")
    return 1 if any(not r.ok for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
