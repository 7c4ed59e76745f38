"""--limit-rate: the token bucket itself, and the total rate a real nginx sees.

The end-to-end tests check a correctness property of the limiter (the bytes a whole
command reads per second), computed from timestamps, not a speed claim: the limiter
can only slow a download, so the assertions are "not above the limit (+10%)" and
"not absurdly below it" (>= 50%, room for a loaded 2-core machine).
"""

from __future__ import annotations

import os
import threading

import pytest

from prefetch.errors import UsageError
from prefetch.engine.ratelimit import RateLimiter, parse_rate
from tests.conftest import run_cli
from tests.test_jobs import job_id_from

MiB = 1 << 20


class FakeClock:
    """A clock that only moves when someone sleeps (thread-safe)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.lock = threading.Lock()

    def time(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def test_token_bucket_keeps_the_total_rate_after_a_small_burst():
    clock = FakeClock()
    limiter = RateLimiter(1000.0, burst=100.0, clock=clock.time, sleep=clock.sleep)

    limiter.wait(100)  # within the burst: no wait
    assert clock.now == 100.0
    for _ in range(50):
        limiter.wait(200)
    # 100 + 50*200 bytes at 1000 B/s after a 100-byte burst: exactly 10 s
    assert clock.now == pytest.approx(110.0)
    limiter.wait(0)
    assert clock.now == pytest.approx(110.0)


def test_token_bucket_is_shared_by_threads():
    limiter = RateLimiter(2 * MiB, burst=64 * 1024)
    import time

    started = time.monotonic()
    threads = [threading.Thread(target=lambda: [limiter.wait(64 * 1024) for _ in range(8)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    # 2 MiB through the bucket at 2 MiB/s, 64 KiB burst: at least 0.96 s, whatever the threads.
    assert elapsed >= (2 * MiB - 64 * 1024) / (2 * MiB) - 0.01


def test_parse_rate_uses_1024_based_units():
    assert parse_rate("2M") == 2 * MiB
    assert parse_rate("500k") == 500 * 1024
    assert parse_rate("1.5MiB") == 1.5 * MiB
    assert parse_rate("100KB/s") == 100 * 1024
    assert parse_rate("4096") == 4096
    assert parse_rate(1e6) == 1e6
    for bad in ("fast", "0", "-1M", "2T", ""):
        with pytest.raises(UsageError):
            parse_rate(bad)


def served_rate(nginx, final) -> float:
    """Bytes per second of ``final`` from nginx's first request to the file's last write.

    The start is when nginx began answering the first request ($msec - $request_time),
    the end the finished file's mtime (its last byte written). nginx's $bytes_sent is
    not used: it counts bytes pushed into the socket buffers of connections the client
    later dropped (the connection ramp cuts some), which the client never read.
    """
    rows = nginx.timings()
    assert rows, "nginx logged no request"
    start = min(end - duration for end, duration, *_ in rows)
    finished = os.stat(final).st_mtime
    return os.path.getsize(final) / (finished - start)


def test_limit_rate_caps_the_total_of_all_connections(nginx_origin, home, tmp_path):
    size = 20 * MiB
    (nginx_origin.root / "big.bin").write_bytes(os.urandom(size))
    out = tmp_path / "big.bin"

    proc = run_cli("get", nginx_origin.url_for("big.bin"), "-o", str(out), "--limit-rate", "2M", timeout=120)

    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size == size
    requests = [r for r in nginx_origin.timings() if r[4] == 206]
    assert len(requests) >= 2  # several connections shared the limit (the default count)
    rate = served_rate(nginx_origin, out)
    assert rate <= 2 * MiB * 1.10, f"{rate / MiB:.2f} MiB/s is above the 2 MiB/s limit"
    assert rate >= 2 * MiB * 0.50, f"{rate / MiB:.2f} MiB/s is far below the limit"


def test_a_background_job_honours_limit_rate(nginx_origin, home, tmp_path):
    size = 6 * MiB
    (nginx_origin.root / "job.bin").write_bytes(os.urandom(size))
    out = tmp_path / "job.bin"

    started = run_cli("get", nginx_origin.url_for("job.bin"), "-o", str(out), "--limit-rate", "2M", "-b")
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60")

    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert out.stat().st_size == size
    rate = served_rate(nginx_origin, out)
    assert rate <= 2 * MiB * 1.10, f"{rate / MiB:.2f} MiB/s is above the 2 MiB/s limit"
    assert rate >= 2 * MiB * 0.50, f"{rate / MiB:.2f} MiB/s is far below the limit"


def test_bad_limit_rate_is_a_usage_error(home, tmp_path):
    proc = run_cli("get", "http://127.0.0.1:1/x.bin", "-o", str(tmp_path / "x"), "--limit-rate", "fast")
    assert proc.returncode == 2
    assert proc.stderr.startswith("prefetch: error: --limit-rate 'fast' is not a rate")
