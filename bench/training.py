#!/usr/bin/env python3
"""Does a download slow the training beside it? A one-thread numpy matmul loop, alone and
beside each downloader fetching one file from a loopback nginx.

    python bench/training.py                    # 1 GiB, 2 rounds
    python bench/training.py --size-mib 256 --rounds 1 --tools prefetch-b,curl
    python bench/training.py --tools prefetch-b,prefetch-b@PREFETCH_SYNC_EVERY=0   # a knob, A/B

Per round and downloader (the order rotates each round): the loop runs alone for
``--alone`` seconds (its baseline), then beside the download until the file is complete.
The slowdown is the loop's median step time beside the download over its median alone,
measured back to back so a change in the machine's load shows in both. Downloaders:

* ``prefetch-b``: ``prefetch get URL -o OUT -b`` (a background job, nice 19 and idle I/O by
  default); done when the verified file appears at OUT;
* ``prefetch-b-no-nice``: the same with ``--no-nice``, to show what the priority buys;
* ``prefetch``: the foreground ``prefetch get URL -o OUT -q``;
* ``aria2c``: ``aria2c -x16 -s16 -k1M``; ``curl``: ``curl -s -o OUT``.

The training loop runs with OMP/OPENBLAS/MKL threads = 1 (one core, as a small CPU model
on a 2-core notebook does). Prints a markdown table and writes ``bench/out/training.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run import clean_outputs, make_file, sha256_of, tool_env  # noqa: E402
from tests.nginx import NginxServer  # noqa: E402

MIB = 1 << 20
TOOLS = ("prefetch-b", "prefetch-b-no-nice", "prefetch", "aria2c", "curl")
# The loop: one step is a few 256x256 matmuls (~10-20 ms on one core); it prints each
# step's start and duration (monotonic clock, shared with this process on Linux).
LOOP = """\
import sys, time
import numpy as np
rng = np.random.default_rng(0)
a = rng.standard_normal((256, 256)); b = rng.standard_normal((256, 256))
out = sys.stdout
while True:
    t0 = time.monotonic()
    for _ in range(8):
        c = a @ b
        a = c / (np.abs(c).max() + 1.0)
    out.write(f"{t0:.6f} {time.monotonic() - t0:.6f}\\n"); out.flush()
"""


def loop_env() -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def command(tool: str, url: str, out: Path) -> list[str]:
    tool = tool.partition("@")[0]  # (the environment suffix: see tool_env_for)
    prefetch = [sys.executable, "-m", "prefetch", "get", url, "-o", str(out)]
    if tool == "prefetch-b":
        return [*prefetch, "-b", "-q"]
    if tool == "prefetch-b-no-nice":
        return [*prefetch, "-b", "-q", "--no-nice"]
    if tool == "prefetch":
        return [*prefetch, "-q"]
    if tool == "aria2c":
        return ["aria2c", "-x16", "-s16", "-k1M", "--allow-overwrite=true", "--auto-file-renaming=false",
                "-q", "-d", str(out.parent), "-o", out.name, url]
    if tool == "curl":
        return ["curl", "-s", "-o", str(out), url]
    raise ValueError(tool)


def tool_env_for(tool: str, env: dict) -> dict:
    """``prefetch-b@PREFETCH_SYNC_EVERY=0``: the tool run with that variable set (A/B of a knob in one run)."""
    name, _, setting = tool.partition("@")
    if not setting:
        return env
    var, _, value = setting.partition("=")
    return {**env, var: value}


def steps_between(lines: list[str], start: float, end: float) -> list[float]:
    steps = []
    for line in lines:
        t0, took = (float(x) for x in line.split())
        if start <= t0 and t0 + took <= end:
            steps.append(took)
    return steps


def measure(tool: str, *, url: str, out: Path, size: int, env: dict, alone: float, work: Path) -> dict:
    """One run: the loop alone for ``alone`` s, then beside ``tool`` until the file is complete."""
    clean_outputs(out, env)
    steps_log = work / "steps.txt"
    with steps_log.open("w") as sink:
        loop = subprocess.Popen([sys.executable, "-c", LOOP], stdout=sink, env=loop_env())
        try:
            time.sleep(1.0)  # numpy imported, caches warm
            alone_start = time.monotonic()
            time.sleep(alone)
            started = time.monotonic()
            proc = subprocess.run(command(tool, url, out), env=tool_env_for(tool, env), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
            while not (out.exists() and out.stat().st_size == size):  # a -b job: the verified file appears
                if time.monotonic() - started > 900:
                    raise RuntimeError(f"{tool}: no complete file after 900 s")
                time.sleep(0.02)
            ended = time.monotonic()
        finally:
            loop.kill()
            loop.wait()
    lines = steps_log.read_text().split("\n")[:-1]
    base = statistics.median(steps_between(lines, alone_start, started))
    during = steps_between(lines, started, ended)
    seconds = ended - started
    return {"tool": tool, "returncode": proc.returncode, "seconds": seconds, "mb_per_s": size / seconds / 1e6,
            "step_alone_ms": base * 1e3, "step_beside_ms": statistics.median(during) * 1e3 if during else None,
            "steps_beside": len(during),
            "slowdown": statistics.median(during) / base if during else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--alone", type=float, default=4.0, help="seconds of the loop alone before each download")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--json-out", default=str(REPO / "bench" / "out" / "training.json"))
    args = parser.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]
    size = args.size_mib * MIB
    load_before = os.getloadavg()
    runs = []
    with tempfile.TemporaryDirectory(prefix="prefetch-training-") as tmp:
        work = Path(tmp)
        served = work / "served"
        served.mkdir()
        digest = make_file(served / "bench.bin", size)
        env = tool_env(work)
        with NginxServer(served) as nginx:
            url = nginx.url_for("bench.bin")
            for rnd in range(args.rounds):
                order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
                for tool in order:
                    out = work / "out" / "bench.bin"
                    out.parent.mkdir(exist_ok=True)
                    run = measure(tool, url=url, out=out, size=size, env=env, alone=args.alone, work=work)
                    run["round"] = rnd + 1
                    run["ok"] = run["returncode"] == 0 and sha256_of(out) == digest
                    runs.append(run)
                    print(f"  {tool:20} round {rnd + 1}: {run['seconds']:.2f}s {run['mb_per_s']:.0f} MB/s "
                          f"slowdown {run['slowdown']:.3f}x ok={run['ok']}", file=sys.stderr, flush=True)
                    clean_outputs(out, env)
    load_after = os.getloadavg()
    print(f"\nTraining loop beside a {args.size_mib} MiB download; load average before "
          f"{load_before[0]:.2f} {load_before[1]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}\n")
    print("| downloader | slowdown (median, min-max) | step alone ms | step beside ms | MB/s (median) | runs ok |")
    print("|---|---|---|---|---|---|")
    for tool in tools:
        mine = [r for r in runs if r["tool"] == tool and r["ok"] and r["slowdown"]]
        if not mine:
            print(f"| {tool} | failed | | | | 0/{args.rounds} |")
            continue
        slow = [r["slowdown"] for r in mine]
        print(f"| {tool} | {statistics.median(slow):.3f}x ({min(slow):.3f}-{max(slow):.3f}) "
              f"| {statistics.median(r['step_alone_ms'] for r in mine):.1f} "
              f"| {statistics.median(r['step_beside_ms'] for r in mine):.1f} "
              f"| {statistics.median(r['mb_per_s'] for r in mine):.0f} | {len(mine)}/{args.rounds} |")
    Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json_out).write_text(json.dumps({"size": size, "load_before": load_before, "load_after": load_after,
                                               "runs": runs}, indent=2))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
