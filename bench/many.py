#!/usr/bin/env python3
"""Many files at once (#19): ``prefetch get -i LIST`` against ``aria2c -i LIST -j16`` and
``wget -i LIST``, and ``prefetch get hf://`` against ``huggingface_hub.snapshot_download``.

    python bench/many.py                 # every row, one round
    python bench/many.py --scale 0.25    # a quarter of the files in each row (a smoke run)
    python bench/many.py --rows loop2000,hf-loop
    python bench/many.py --rows rtt200 --busy 2   # beside two busy loops (a notebook training on every core)

Rows (all tools measured in the same run, every output checked byte for byte):

* ``rtt200``: 200 files of 64 KiB behind the latency proxy (200 ms round trip) in front of
  nginx with ``limit_rate 1m`` (per connection);
* ``loop2000``: 2,000 files of 16 KiB from nginx on loopback;
* ``tls2000``: the same over https (nginx with a throwaway CA that every tool is given:
  ``REQUESTS_CA_BUNDLE``, ``--ca-certificate``); not one of the issue's rows, measured so that
  the https path is seen too;
* ``hf-loop`` / ``hf-rtt``: a repo of 300 files of 32 KiB plus 2 of 8 MiB on the local hub
  (``tests/hub_origin.py``), directly and through the latency proxy (the Hub API and the
  small files go through it; LFS files are redirected to the hub's CDN on loopback),
  ``prefetch get hf://`` against ``snapshot_download(max_workers=8)`` (its default).

``--busy N`` runs N busy loops (``while 1: pass``, nice 0: a training loop's shape) for the
whole run, started before the load average is read and killed after it is read again.

Reuses ``bench/run.py``'s helpers (timing, environments, machine info). Results go to
``bench/out/many.json`` and a markdown table on stdout, with the load average.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import REPO, compile_prefetch, machine_info, prefetch_cli, run_measured, tool_env  # noqa: E402

from tests.hub_origin import HubServer  # noqa: E402
from tests.latency_proxy import LatencyProxy  # noqa: E402
from tests.nginx import NginxServer  # noqa: E402

ROWS = ("rtt200", "loop2000", "tls2000", "hf-loop", "hf-rtt")
TARGET = 0.8  # the target: prefetch at most 0.8x the best other tool


def write_files(root: Path, count: int, size: int) -> dict[str, str]:
    """``count`` random files of ``size`` bytes; name -> sha256."""
    root.mkdir(parents=True, exist_ok=True)
    sums = {}
    for i in range(count):
        data = os.urandom(size)
        name = f"f{i:05d}.bin"
        (root / name).write_bytes(data)
        sums[name] = hashlib.sha256(data).hexdigest()
    return sums


def check_outputs(out: Path, sums: dict[str, str]) -> bool:
    for name, digest in sums.items():
        path = out / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return False
    return True


def list_commands(tool: str, listing: Path, out: Path, ca: Path | None = None) -> list[str]:
    """The tool's command for ``listing`` into ``out``; ``ca``: the https server's CA (prefetch
    reads it from ``REQUESTS_CA_BUNDLE``)."""
    trust = [f"--ca-certificate={ca}"] if ca else []
    if tool == "prefetch":
        return [*prefetch_cli(), "get", "-i", str(listing), "-P", str(out), "-q"]
    if tool == "aria2c":
        return ["aria2c", "-i", str(listing), "-j16", "-d", str(out), "-q", "--allow-overwrite=true",
                "--auto-file-renaming=false", *trust]
    if tool == "wget":
        return ["wget", "-q", "-i", str(listing), "-P", str(out), *trust]
    if tool == "wget+sync":  # wget, then its files flushed to the disk (`sync -f`: syncfs), which prefetch
        # does before it renames files into place and wget never does: what durability costs
        return ["bash", "-c", 'wget -q -i "$1" -P "$2" "${@:3}" && sync -f "$2"', "bash", str(listing), str(out),
                *trust]
    raise ValueError(tool)


def bench_list(row: str, *, count: int, size: int, rtt: float | None, work: Path, tls: bool = False) -> list[dict]:
    root = work / f"www-{row}"
    sums = write_files(root, count, size)
    results = []
    with NginxServer(root, limit_rate="1m" if rtt else None, tls=tls) as nginx:
        proxy = LatencyProxy(nginx.port, rtt=rtt).start() if rtt else None
        try:
            base = proxy.url + "/" if proxy else nginx.url
            listing = work / f"{row}.txt"
            listing.write_text("".join(f"{base}{name}\n" for name in sums))
            for tool in ("prefetch", "aria2c", "wget", *(("wget+sync",) if rtt is None else ())):
                if tool != "prefetch" and shutil.which(tool.split("+")[0]) is None:
                    continue
                out = work / f"out-{row}-{tool}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                env = tool_env(work)
                if tls:
                    env["REQUESTS_CA_BUNDLE"] = str(nginx.ca_path)
                shutil.rmtree(env["PREFETCH_HOME"], ignore_errors=True)
                wall, code, rss, cpu = run_measured(list_commands(tool, listing, out, nginx.ca_path), env=env, cwd=work,
                                                    log=work / f"{row}-{tool}.log", timeout=900)
                results.append({"row": row, "tool": tool, "seconds": round(wall, 2), "exit": code,
                                "ok": code == 0 and check_outputs(out, sums), "cpu": round(cpu, 2),
                                "rss_mib": round(rss / 1024, 1)})
        finally:
            if proxy:
                proxy.stop()
    return results


SNAPSHOT = """\
import sys
from huggingface_hub import snapshot_download
snapshot_download(sys.argv[1], max_workers=8)
"""


def bench_hub(row: str, *, small: int, rtt: float | None, work: Path) -> list[dict]:
    files = {f"data/part-{i:04d}.bin": os.urandom(32 << 10) for i in range(small)}
    files.update({f"model-{i}.safetensors": os.urandom(8 << 20) for i in range(2)})
    results = []
    with HubServer() as hub:
        hub.add_repo("acme/many", files, lfs={n for n in files if n.endswith(".safetensors")})
        proxy = LatencyProxy(int(hub.url.rsplit(":", 1)[1]), rtt=rtt).start() if rtt else None
        try:
            endpoint = proxy.url if proxy else hub.url
            for tool in ("prefetch", "snapshot_download"):
                env = tool_env(work)
                hf_home = work / f"hf-{row}-{tool}"
                shutil.rmtree(hf_home, ignore_errors=True)
                shutil.rmtree(env["PREFETCH_HOME"], ignore_errors=True)
                env.update(HF_ENDPOINT=endpoint, HF_HOME=str(hf_home), HF_HUB_DISABLE_TELEMETRY="1",
                           HF_HUB_DISABLE_PROGRESS_BARS="1")
                cmd = ([*prefetch_cli(), "get", "hf://acme/many", "-q"] if tool == "prefetch"
                       else [sys.executable, "-c", SNAPSHOT, "acme/many"])
                wall, code, rss, cpu = run_measured(cmd, env=env, cwd=work, log=work / f"{row}-{tool}.log",
                                                    timeout=900)
                snaps = list((hf_home / "hub" / "models--acme--many" / "snapshots").glob("*"))
                ok = code == 0 and len(snaps) == 1 and all(
                    (snaps[0] / name).read_bytes() == data for name, data in files.items())
                results.append({"row": row, "tool": tool, "seconds": round(wall, 2), "exit": code, "ok": ok,
                                "cpu": round(cpu, 2), "rss_mib": round(rss / 1024, 1)})
        finally:
            if proxy:
                proxy.stop()
    return results


def ratios(results: list[dict]) -> dict[str, float | None]:
    out = {}
    for row in dict.fromkeys(r["row"] for r in results):
        mine = [r for r in results if r["row"] == row and r["tool"] == "prefetch" and r["ok"]]
        others = [r["seconds"] for r in results if r["row"] == row and r["tool"] not in ("prefetch", "wget+sync")
                  and r["ok"]]
        out[row] = round(mine[0]["seconds"] / min(others), 2) if mine and others else None
        synced = [r["seconds"] for r in results if r["row"] == row and r["tool"] == "wget+sync" and r["ok"]]
        if mine and synced:  # (not a target: the durability prefetch keeps, wget's way)
            out[f"{row} vs wget+sync"] = round(mine[0]["seconds"] / synced[0], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each row's file count")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N busy loops at nice 0 beside every tool (a machine that trains on its CPUs)")
    args = parser.parse_args(argv)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    compile_prefetch()
    loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    try:
        if loops:
            time.sleep(1.0)  # (the loops running before the first tool starts)
        return _run_rows(parser, args, rows)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def _run_rows(parser, args, rows: list[str]) -> int:
    load_before = os.getloadavg()
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="prefetch-many-") as tmp:
        work = Path(tmp)
        scaled = lambda n: max(1, int(n * args.scale))  # noqa: E731
        for row in rows:
            started = time.monotonic()
            if row == "rtt200":
                results += bench_list(row, count=scaled(200), size=64 << 10, rtt=0.2, work=work)
            elif row == "loop2000":
                results += bench_list(row, count=scaled(2000), size=16 << 10, rtt=None, work=work)
            elif row == "tls2000":
                results += bench_list(row, count=scaled(2000), size=16 << 10, rtt=None, work=work, tls=True)
            elif row == "hf-loop":
                results += bench_hub(row, small=scaled(300), rtt=None, work=work)
            elif row == "hf-rtt":
                results += bench_hub(row, small=scaled(300), rtt=0.2, work=work)
            else:
                parser.error(f"unknown row {row!r}")
            print(f"{row}: {time.monotonic() - started:.0f}s", file=sys.stderr)
    load_after = os.getloadavg()
    found = ratios(results)
    report = {"machine": machine_info(), "load_before": load_before, "load_after": load_after,
              "scale": args.scale, "busy": args.busy, "results": results, "ratios": found, "target": TARGET}
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "many.json").write_text(json.dumps(report, indent=2))
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; scale {args.scale}; "
          f"{args.busy} busy loops")
    print("| row | tool | seconds | ok | CPU s | RSS MiB |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['row']} | {r['tool']} | {r['seconds']} | {'yes' if r['ok'] else 'NO'} | {r['cpu']} | {r['rss_mib']} |")
    print("\n| row | prefetch / best other | target |\n|---|---|---|")
    for row, value in found.items():
        verdict = "?" if value is None else ("MET" if value <= TARGET else "NOT MET")
        target = f"<= {TARGET} {verdict}" if not row.endswith("wget+sync") else "none (wget with prefetch's flush)"
        print(f"| {row} | {value} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
