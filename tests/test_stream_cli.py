"""``prefetch get ... --print-paths`` (and ``-0``): each placed path on stdout as its file lands."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import time

from tests.test_stream import first_get, put_shards

KiB = 1 << 10


def input_file(tmp_path, entries) -> str:
    path = tmp_path / "shards.txt"
    path.write_text("".join(f"{e['url']} sha256={e['sha256']}\n" for e in entries))
    return str(path)


def test_print_paths_prints_each_path_as_it_lands(origin, home, tmp_path):
    entries, names, blobs = put_shards(origin, [256 * KiB] * 6)
    origin.total_rate = 512 * KiB
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "prefetch", "get", "-i", input_file(tmp_path, entries),
                             "-P", str(out), "--connections", "1", "--host-connections", "2", "--print-paths"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    first = proc.stdout.readline()
    first_at = time.monotonic()
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = [first.rstrip("\n"), *rest.splitlines()]
    assert sorted(lines) == sorted(str(out / n) for n in names)  # paths only: the summary is not on stdout
    assert first_at < first_get(origin, names[-1])  # the first path was out before the last file started
    assert all((out / n).read_bytes() == blobs[n] for n in names)


def test_print_paths_into_xargs_with_nul_separators(origin, home, tmp_path):
    entries, names, blobs = put_shards(origin, [64 * KiB] * 4)
    out = tmp_path / "out"
    command = (f"{shlex.quote(sys.executable)} -m prefetch get -i {shlex.quote(input_file(tmp_path, entries))} "
               f"-P {shlex.quote(str(out))} -0 -q | xargs -0 -n1 sha256sum")
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120, env=os.environ.copy(),
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    sums = dict(line.split()[::-1] for line in proc.stdout.splitlines())
    assert sums == {str(out / n): hashlib.sha256(blobs[n]).hexdigest() for n in names}


def test_print_paths_refuses_background_and_json(cli, origin, tmp_path):
    origin.put("a.bin", b"x" * 100)
    for flag in ("-b", "--json"):
        proc = cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), "--print-paths", flag)
        assert proc.returncode == 2 and "--print-paths" in proc.stderr, proc.stderr
