#!/usr/bin/env python3
"""Train while it downloads: ``prefetch.as_completed`` against "download everything, then train".

    python bench/stream.py                         # 8 shards x 8 MiB over a 16 MiB/s route
    python bench/stream.py --shard-mib 2 --rate-mib 4 --step 0.25   # a smaller, quicker run

Both ways run in the same process, one after the other, each into a fresh cache, against
the same throttled route: the test suite's origin (``tests/origin.py``) on 127.0.0.1
with ``total_rate`` (one shared link that more connections cannot widen). Each shard is a
WebDataset-style tar; "training" on a shard reads every sample
(``prefetch.adapters.iter_tar_samples``) and then spends ``--step`` seconds per shard, the
model's time. Measured: time to the first batch (the first shard's samples in hand) and
total time (the last shard trained), from the moment the download is asked for.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import prefetch  # noqa: E402
from prefetch.adapters import iter_tar_samples  # noqa: E402
from tests.origin import OriginServer  # noqa: E402 - the test origin, with its shared-link throttle

MiB = 1 << 20


def make_shard(index: int, size: int, samples: int = 16) -> bytes:
    buf = io.BytesIO()
    each = max(1, size // samples)
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for k in range(samples):
            for ext, data in (("bin", os.urandom(each)), ("cls", str(k % 10).encode())):
                info = tarfile.TarInfo(f"s{index:03d}-{k:04d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def train(path: Path, step: float) -> int:
    samples = sum(1 for _ in iter_tar_samples(path))
    time.sleep(step)
    return samples


def run_streaming(entries, out: Path, step: float) -> tuple[float, float]:
    start = time.monotonic()
    first = None
    for path in prefetch.as_completed([], urls=entries, output_dir=str(out), progress=False):
        samples = iter_tar_samples(path)
        next(samples)
        first = first or time.monotonic() - start
        train(path, step)
    return first, time.monotonic() - start


def run_then_train(entries, out: Path, step: float) -> tuple[float, float]:
    start = time.monotonic()
    results = prefetch.ensure([], urls=entries, output_dir=str(out), progress=False)
    first = None
    for result in results:
        path = Path(result.path)
        next(iter_tar_samples(path))
        first = first or time.monotonic() - start
        train(path, step)
    return first, time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--shard-mib", type=float, default=8.0)
    parser.add_argument("--rate-mib", type=float, default=16.0, help="the route: MiB/s shared by every connection")
    parser.add_argument("--step", type=float, default=0.5, help="seconds of model time per shard")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="prefetch-bench-stream-") as tmp:
        tmp_path = Path(tmp)
        os.environ["PREFETCH_HOME"] = str(tmp_path / "state")
        for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
            os.environ.pop(var, None)
        with OriginServer() as origin:
            entries = []
            for i in range(args.shards):
                data = make_shard(i, int(args.shard_mib * MiB))
                origin.put(f"train-{i:04d}.tar", data)
                entries.append({"url": origin.url_for(f"train-{i:04d}.tar"), "sha256": hashlib.sha256(data).hexdigest()})
            origin.total_rate = int(args.rate_mib * MiB)
            rows = {}
            rows["download, then train"] = run_then_train(entries, tmp_path / "all-first", args.step)
            rows["as_completed"] = run_streaming(entries, tmp_path / "streaming", args.step)
    load = os.getloadavg()
    print(f"{args.shards} shards x {args.shard_mib:g} MiB, route {args.rate_mib:g} MiB/s shared, "
          f"{args.step:g} s of training per shard; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print("| way | time to first batch | total time |")
    print("|---|---|---|")
    for way, (first, total) in rows.items():
        print(f"| {way} | {first:.2f} s | {total:.2f} s |")
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / "stream.json").write_text(json.dumps({"args": vars(args), "loadavg": load, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
