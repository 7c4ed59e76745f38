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
