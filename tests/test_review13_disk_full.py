"""A download folder that refuses more bytes mid-file, portably: RLIMIT_FSIZE makes the kernel
answer EFBIG to the write past the limit (no mount, no privilege; Python ignores SIGXFSZ). The
same paths answer ENOSPC on a full disk (checked by hand on a 2 MiB tmpfs, see the speed log).
One line, exit 5 (docs/exit-codes.md), nothing at a final name, the .part kept and resumed
byte-exact by the next run; a background job says the same in its record and `wait`."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys

from tests.test_jobs import job_id_from

LIMIT = 256 << 10


def _limited(*args: str) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

    return subprocess.run([sys.executable, "-m", "prefetch", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, preexec_fn=limit)


def _one_line_5(proc: subprocess.CompletedProcess) -> list[str]:
    assert proc.returncode == 5, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    return [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]


def test_a_file_refused_mid_write_keeps_its_part_and_resumes(nginx_origin, home, cli, tmp_path):
    data = os.urandom(3 << 20)
    (nginx_origin.root / "big.bin").write_bytes(data)
    url = f"{nginx_origin.url_for('big.bin')}#sha256={hashlib.sha256(data).hexdigest()}"
    final = tmp_path / "dl" / "big.bin"
    errors = _one_line_5(_limited("get", url, "-o", str(final)))
    assert len(errors) == 1 and f"{final}.part" in errors[0], errors
    assert not final.exists()
    assert 0 < (tmp_path / "dl" / "big.bin.part").stat().st_size <= LIMIT
    again = cli("get", url, "-o", str(final))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming" in again.stderr
    assert final.read_bytes() == data
    assert sorted(p.name for p in final.parent.iterdir()) == ["big.bin"]


def test_many_small_files_refused_are_a_few_lines_and_nothing_placed(nginx_origin, home, tmp_path):
    bodies = {f"s{i}.bin": os.urandom((LIMIT + 4096) if i % 2 else 1000) for i in range(12)}
    for name, body in bodies.items():
        (nginx_origin.root / name).write_bytes(body)
    folder = tmp_path / "dl"
    proc = _limited("get", *(nginx_origin.url_for(n) for n in bodies), "-P", str(folder))
    errors = _one_line_5(proc)
    big = sorted(n for n, b in bodies.items() if len(b) > LIMIT)
    # The first three refused files one line each, then one line naming the rest (they failed
    # the same way: a list of 2,000 on a full disk is four lines, not 2,000).
    assert len(errors) == 4 and all("File too large" in e for e in errors[:3]), errors
    assert "3 more files failed the same way" in errors[3], errors
    assert sorted(n for n in big if any(n in e for e in errors)) == big, errors
    for name, body in bodies.items():
        placed = folder / name
        if len(body) > LIMIT:
            assert not placed.exists(), name
        else:
            assert placed.read_bytes() == body, name


def test_a_background_job_refused_mid_write_says_so_in_its_record_and_wait(nginx_origin, home, cli, tmp_path):
    data = os.urandom(1 << 20)
    (nginx_origin.root / "big.bin").write_bytes(data)
    final = tmp_path / "dl" / "big.bin"
    started = _limited("get", nginx_origin.url_for("big.bin"), "-o", str(final), "-b")
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    waited = cli("wait", job, timeout=120)
    assert waited.returncode == 5, waited.stderr
    assert "Traceback" not in waited.stderr and "File too large" in waited.stderr, waited.stderr
    stored = json.loads((home / ".prefetch" / "state" / "jobs" / f"{job}.json").read_text())
    assert (stored["state"], stored["exit_code"]) == ("failed", 5), stored
    assert not final.exists() and (tmp_path / "dl" / "big.bin.part").exists()
