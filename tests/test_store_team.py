"""Five notebook machines seed one team store at once: the origin serves each file about once."""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from collections import defaultdict

from tests.helpers import start_cli
from tests.nginx import NginxServer
from tests.test_store import MIB, assert_store_consistent, machine_env, payload, registry

MACHINES = 5


def origin_bytes(access_log) -> dict[str, int]:
    """Body bytes nginx sent per file (combined log format), every request included."""
    sent: dict[str, int] = defaultdict(int)
    for line in access_log.read_text().splitlines():
        m = re.search(r'"GET /(\S+) HTTP/[\d.]+" \d+ (\d+)', line)
        if m:
            sent[m.group(1)] += int(m.group(2))
    return sent


def test_five_machines_seed_one_store_and_the_origin_serves_each_file_about_once(s3, tmp_path):
    files = {"team-a.bin": payload(24 * MIB, 41), "team-b.bin": payload(6 * MIB, 42)}
    www = tmp_path / "www"
    www.mkdir()
    for name, data in files.items():
        (www / name).write_bytes(data)
    with NginxServer(www, limit_rate="4m") as nginx:
        reg = registry(tmp_path / "r.toml", {n: (nginx.url_for(n), d) for n, d in files.items()})
        envs = [machine_env(tmp_path / f"machine{i}") for i in range(MACHINES)]
        procs = [start_cli("get", "toy", "--registry", reg, "--seed", s3.prefix, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for env in envs]
        outputs = []
        deadline = time.monotonic() + 240
        for proc in procs:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outputs.append((proc.returncode, err))
        time.sleep(0.2)  # nginx writes the access log line when a request ends
        sent = origin_bytes(nginx.access_log)

    for code, err in outputs:
        assert code == 0, err
    for env in envs:
        for name, data in files.items():
            placed = (tmp_path / env["KERAS_HOME"] / "datasets" / name).read_bytes()
            assert hashlib.sha256(placed).digest() == hashlib.sha256(data).digest()
    assert assert_store_consistent(s3, s3.prefix) == files
    ratios = {name: sent.get(name, 0) / len(data) for name, data in files.items()}
    print(f"\nfive machines: origin bytes / file size = "
          + ", ".join(f"{n} {r:.2f}" for n, r in ratios.items()))
    for name, ratio in ratios.items():
        # One copy (issue 20's target: at most 1.1x): pieces are closed ranges, so a split
        # wastes nothing; five machines without the store would make it 5 and more.
        if not 0.99 <= ratio <= 1.1:
            for i, (_, err) in enumerate(outputs):
                print(f"--- machine {i}\n" + "\n".join(l for l in err.splitlines() if " progress " not in l))
        assert 0.99 <= ratio <= 1.1, (name, ratio, sent)
    for name in files:  # one machine seeded each file; the others read it from the store
        assert sum(f"seeded the store: uploaded {s3.prefix}{name}" in err for _, err in outputs) == 1
        from_store = [err for _, err in outputs
                      if any(f"{name} done" in line and "?(signed)" in line for line in err.splitlines())]
        assert len(from_store) == MACHINES - 1, [err for _, err in outputs]
    # Whether a machine waits for a file's seeder or finds the file in the store already
    # depends on when it gets there (a 6 MiB file may be seeded before the others ask); the
    # 24 MiB one keeps a seeder busy long enough that the others wait for it, then read it.
    assert any(f"{s3.prefix}{name} is in the store now" in err for _, err in outputs for name in files)
