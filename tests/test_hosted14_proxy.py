"""AutoDL's "academic acceleration" proxy and a platform-wide ``no_proxy``, tried for real with
tinyproxy: a proxy that refuses the CONNECT tunnel (``ConnectPort 443`` only: ``403 Access
violation``) is one line naming the proxy (password hidden), exit 3 at once (its policy:
asking again changes nothing), in the foreground and from a ``-b`` job's ``wait`` and
``status``; the password is in no output, record or log. (A proxy that needs credentials, 407:
tests/test_proxies.py.)
"""

from __future__ import annotations

import hashlib
import os
import random
import time

from tests.conftest import run_cli
from tests.proxies import TinyProxy
from tests.test_jobs import job_id_from
from tests.test_proxies import everything_written, env_with

PASSWORD = "turbo-pw-s3cret"
DATA = random.Random(1416).randbytes(300_000)
SHA = hashlib.sha256(DATA).hexdigest()


def test_a_proxy_that_refuses_the_tunnel_is_one_final_line_and_never_shows_its_password(home, tls_origin, tmp_path):
    tls_origin.put("f.bin", DATA)
    with TinyProxy(tmp_path / "tinyproxy", user="alice", password=PASSWORD, extra="ConnectPort 443") as proxy:
        env = env_with(https_proxy=proxy.url_with_credentials, no_proxy="localhost,.autodl.com",
                       PREFETCH_RETRIES="3")
        env.pop("NO_PROXY", None)
        fg = run_cli("get", tls_origin.url_for("f.bin"), "--sha256", SHA, "-P", str(tmp_path / "d"), env=env)
        assert fg.returncode == 3, fg.stderr
        errors = [line for line in fg.stderr.splitlines() if line.startswith("prefetch: error: ")]
        assert len(errors) == 1, fg.stderr
        assert f"the proxy {proxy.url} did not open a tunnel to 127.0.0.1:{tls_origin.port} (403" in errors[0], errors
        assert proxy.log().count("CONNECT 127.0.0.1") == 1  # final at once: not asked again

        bg = run_cli("get", tls_origin.url_for("f.bin"), "--sha256", SHA, "-P", str(tmp_path / "d"), "-b", env=env)
        assert bg.returncode == 0, bg.stderr
        job = job_id_from(bg.stdout)
        waited = run_cli("wait", job, "--timeout", "60", env=env)
        assert waited.returncode == 3 and "did not open a tunnel" in waited.stderr, waited.stderr
        status = run_cli("status", job, env=env)
        assert "failed (exit 3)" in status.stdout and "did not open a tunnel" in status.stdout, status.stdout
        shown = run_cli("status", job, "--json", env=env).stdout + run_cli("log", job, env=env).stdout
    assert not (tmp_path / "d").exists() or os.listdir(tmp_path / "d") == []
    for text in (fg.stderr, bg.stdout, bg.stderr, waited.stderr, status.stdout, shown, everything_written(home)):
        assert PASSWORD not in text


def _without_proxies(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}


def test_resume_from_a_new_kernel_uses_the_proxy_of_the_cell_that_started_the_job(home, origin, tmp_path):
    """``!source /etc/network_turbo && prefetch get URL -b``; the worker dies (the machine was
    stopped); ``!prefetch resume J`` from a new kernel, whose shell sets no proxy: the job goes
    on through the proxy it was started with (before: straight to the server)."""
    from tests.test_jobs_kill import kill_worker

    data = random.Random(1418).randbytes(2_000_000)
    origin.put("t.bin", data)
    origin.total_rate = 200 << 10
    final = tmp_path / "data" / "t.bin"
    with TinyProxy(tmp_path / "tinyproxy") as proxy:
        env = env_with(http_proxy=proxy.url, no_proxy="localhost,.autodl.com")
        env.pop("NO_PROXY", None)
        started = run_cli("get", origin.url_for("t.bin"), "-o", str(final), "-b", env=env)
        assert started.returncode == 0, started.stderr
        job = job_id_from(started.stdout)
        part = final.with_name("t.bin.part")
        deadline = time.monotonic() + 60
        while not (part.exists() and part.stat().st_size > 0):
            assert time.monotonic() < deadline, "the job never started writing"
            time.sleep(0.05)
        kill_worker(job)
        asked = proxy.log().count("GET http://127.0.0.1")
        assert asked >= 1
        origin.total_rate = None

        fresh = _without_proxies(env)
        resumed = run_cli("resume", job, env=fresh)
        assert resumed.returncode == 0, resumed.stderr
        waited = run_cli("wait", job, "--timeout", "60", env=fresh)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert final.read_bytes() == data
        assert proxy.log().count("GET http://127.0.0.1") > asked  # the resumed worker went through the proxy


def test_resume_of_a_job_whose_proxy_had_a_password_asks_for_the_variable_again(home, origin, tmp_path):
    origin.put("p.bin", DATA)
    final = tmp_path / "data" / "p.bin"
    dead = f"http://alice:{PASSWORD}@127.0.0.1:9"  # (nothing listens: the job fails, exit 3)
    env = env_with(http_proxy=dead, no_proxy="localhost")
    env.pop("NO_PROXY", None)
    started = run_cli("get", origin.url_for("p.bin"), "--sha256", SHA, "-o", str(final), "-b", env=env)
    job = job_id_from(started.stdout)
    assert run_cli("wait", job, "--timeout", "60", env=env).returncode == 3

    refused = run_cli("resume", job, env=_without_proxies(env))
    assert refused.returncode == 2, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("prefetch: error: ")]
    assert len(errors) == 1 and "set http_proxy again" in errors[0], refused.stderr
    assert "http://***@127.0.0.1:9" in errors[0] and PASSWORD not in refused.stderr

    with TinyProxy(tmp_path / "tinyproxy") as proxy:
        again = run_cli("resume", job, env=dict(_without_proxies(env), http_proxy=proxy.url))
        assert again.returncode == 0, again.stderr
        assert run_cli("wait", job, "--timeout", "60", env=env).returncode == 0
        assert "GET http://127.0.0.1" in proxy.log()
    assert final.read_bytes() == DATA

    # no_proxy='*' in the resuming shell: straight to the server, no question asked.
    other = tmp_path / "data" / "q.bin"
    job = job_id_from(run_cli("get", origin.url_for("p.bin"), "--sha256", SHA, "-o", str(other), "-b", env=env).stdout)
    assert run_cli("wait", job, "--timeout", "60", env=env).returncode == 3
    direct = dict(_without_proxies(env), no_proxy="*")
    resumed = run_cli("resume", job, env=direct)
    assert resumed.returncode == 0, resumed.stderr
    assert run_cli("wait", job, "--timeout", "60", env=direct).returncode == 0
    assert other.read_bytes() == DATA
    assert PASSWORD not in everything_written(home)
