"""bench: a torchvision dataset through prefetch against torchvision's own ``download=True``.

    python bench/torchvision.py                       # throttled and rtt200, 48 MiB, 1 round
    python bench/torchvision.py --size-mib 16 --scenarios rtt200

Needs nginx, torch and torchvision (the test extra). Everything runs on 127.0.0.1: a
CIFAR-10-shaped archive of random rows (``cifar-10-python.tar.gz``) is served by nginx,
``throttled`` with ``limit_rate 10m`` per connection, ``rtt200`` with ``limit_rate 1m``
behind ``tests/latency_proxy.py`` adding 200 ms of round trip (the route abroad).

Rows, each measured in the same run against the same server:

* ``torchvision``: ``CIFAR10(root, download=True)`` in a fresh process, its URL pointed at
  the server and its md5 table at the synthetic file's: download, md5, extract, load.
* ``prefetch``: ``prefetch get torchvision:CIFAR10 --root R --mirror SERVER`` (download,
  md5, extract), then the same ``CIFAR10(root, download=True)``, which finds it in place.

Times are wall seconds; the torchvision process's import time is left out of both rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.latency_proxy import LatencyProxy  # noqa: E402
from tests.nginx import NginxServer  # noqa: E402

MIB = 1 << 20

LOAD = """
import json, sys, time
import torchvision.datasets as D
root, url, md5s = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
D.CIFAR10.url = url
D.CIFAR10.tgz_md5 = md5s["cifar-10-python.tar.gz"]
D.CIFAR10.train_list = [[n, md5s[n]] for n, _ in D.CIFAR10.train_list]
D.CIFAR10.test_list = [[n, md5s[n]] for n, _ in D.CIFAR10.test_list]
D.CIFAR10.meta = dict(D.CIFAR10.meta, md5=md5s["batches.meta"])
started = time.monotonic()
ds = D.CIFAR10(root, train=True, download=True)
print(json.dumps({"seconds": time.monotonic() - started, "rows": len(ds)}))
"""


def build_archive(path: Path, size: int) -> dict[str, str]:
    """A cifar-10-python.tar.gz of about ``size`` bytes (random rows); md5s of it and its members."""
    import hashlib

    import numpy as np

    from tests.archives import tar_gz
    from tests.torchvision_synth import _py2_pickle

    rng = np.random.default_rng(0)
    rows = max(6, size // 3072 // 6)
    members = {"batches.meta": _py2_pickle({b"label_names": [b"a", b"b"], b"num_vis": 3072})}
    for name in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"):
        members[name] = _py2_pickle({b"batch_label": name.encode(),
                                     b"data": rng.integers(0, 256, size=(rows, 3072), dtype=np.uint8),
                                     b"labels": [0] * rows})
    data = tar_gz(members, folder="cifar-10-batches-py")
    path.write_bytes(data)
    md5s = {n: hashlib.md5(d).hexdigest() for n, d in members.items()}
    md5s[path.name] = hashlib.md5(data).hexdigest()
    return md5s


def load(root: Path, url: str, md5s: dict, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", LOAD, str(root), url, json.dumps(md5s)], capture_output=True,
                          text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def registry(path: Path, md5: str) -> Path:
    path.write_text('[torchvision.CIFAR10]\ndescription = "bench"\n[[torchvision.CIFAR10.files]]\n'
                    'name = "cifar-10-python.tar.gz"\nurls = ["http://127.0.0.1:9/cifar-10-python.tar.gz"]\n'
                    f'md5 = "{md5}"\nextract = [""]\n')
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=48)
    parser.add_argument("--scenarios", default="throttled,rtt200")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="prefetch-bench-tv-") as tmp:
        work = Path(tmp)
        www = work / "www"
        www.mkdir()
        md5s = build_archive(www / "cifar-10-python.tar.gz", args.size_mib * MIB)
        size = (www / "cifar-10-python.tar.gz").stat().st_size
        reg = registry(work / "registry.toml", md5s["cifar-10-python.tar.gz"])
        env = dict(os.environ, PREFETCH_HOME=str(work / "prefetch-home"), HOME=str(work))
        for scenario in args.scenarios.split(","):
            rate, rtt = {"throttled": ("10m", None), "rtt200": ("1m", 0.2)}[scenario]
            nginx = NginxServer(www, limit_rate=rate).start()
            proxy = LatencyProxy(nginx.port, rtt=rtt).start() if rtt else None
            base = (proxy.url if proxy else nginx.url).rstrip("/") + "/"
            try:
                tv_root = work / f"tv-{scenario}"
                tv = load(tv_root, base + "cifar-10-python.tar.gz", md5s, env)
                pf_root = work / f"pf-{scenario}"
                started = time.monotonic()
                got = subprocess.run([sys.executable, "-m", "prefetch", "get", "torchvision:CIFAR10", "--root",
                                      str(pf_root), "--registry", str(reg), "--mirror", base, "-q"],
                                     capture_output=True, text=True, env=env, timeout=3600)
                get_s = time.monotonic() - started
                if got.returncode != 0:
                    raise RuntimeError(got.stderr[-2000:])
                after = load(pf_root, "http://127.0.0.1:9/cifar-10-python.tar.gz", md5s, env)
            finally:
                if proxy:
                    proxy.stop()
                nginx.stop()
            rows.append({"scenario": scenario, "torchvision_s": round(tv["seconds"], 2),
                         "prefetch_get_s": round(get_s, 2), "then_torchvision_s": round(after["seconds"], 2),
                         "prefetch_total_s": round(get_s + after["seconds"], 2)})
    load_after = os.getloadavg()
    print(f"CIFAR-10-shaped archive, {size / MIB:.1f} MiB; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after; 1 round\n")
    print("| route | torchvision download=True | prefetch get | then CIFAR10(download=True) | prefetch total | speed-up |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scenario']} | {r['torchvision_s']:.2f} s | {r['prefetch_get_s']:.2f} s | "
              f"{r['then_torchvision_s']:.2f} s | {r['prefetch_total_s']:.2f} s | "
              f"{r['torchvision_s'] / r['prefetch_total_s']:.1f}x |")
    out = REPO / "bench" / "out" / "torchvision.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"size": size, "load": [load_before, load_after], "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
