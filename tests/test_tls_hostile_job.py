"""A ``-b`` job trusts the CA bundle and reads the netrc the foreground would (a hostile review of TLS).

The worker runs in the jobs directory, not the caller's: a relative ``REQUESTS_CA_BUNDLE=ca.pem``
(or ``CURL_CA_BUNDLE``, ``SSL_CERT_FILE``, ``SSL_CERT_DIR``, ``NETRC``), which a notebook sets
for the corporate CA next to it, named no file there; the job failed ("no such file") where the
same command in the foreground worked. Real CLI, real worker, TLS origin on 127.0.0.1.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_jobs import job_id_from

DATA = random.Random(57).randbytes(40_000)
_CA_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"])
def test_a_relative_ca_bundle_holds_in_a_background_job(home, tmp_path, variable):
    with OriginServer(tls=True) as origin:
        origin.put("d.bin", DATA)
        work = tmp_path / "notebook"
        work.mkdir()
        shutil.copy(origin.ca_path, work / "corp-ca.pem")
        env = {k: v for k, v in os.environ.items() if k not in _CA_VARS}
        env[variable] = "corp-ca.pem"

        out = tmp_path / "d.bin"
        fore = run_cli("get", origin.url_for("d.bin"), "-o", str(out), "-q", env=env, cwd=work)
        assert fore.returncode == 0, fore.stderr
        out.unlink()

        started = run_cli("get", origin.url_for("d.bin"), "-o", str(out), "-b", env=env, cwd=work)
        assert started.returncode == 0, started.stderr
        waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60", env=env, cwd=work)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert out.read_bytes() == DATA


def test_a_relative_netrc_holds_in_a_background_job(home, tmp_path):
    with OriginServer() as origin:
        origin.put("locked.bin", DATA)
        origin.basic_auth = ("alice", "pa55-word")
        work = tmp_path / "notebook"
        work.mkdir()
        (work / "creds").write_text("machine 127.0.0.1\n  login alice\n  password pa55-word\n")
        (work / "creds").chmod(0o600)
        env = dict(os.environ, NETRC="creds")

        out = tmp_path / "locked.bin"
        fore = run_cli("get", origin.url_for("locked.bin"), "-o", str(out), "-q", env=env, cwd=work)
        assert fore.returncode == 0, fore.stderr
        out.unlink()

        started = run_cli("get", origin.url_for("locked.bin"), "-o", str(out), "-b", env=env, cwd=work)
        waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60", env=env, cwd=work)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert out.read_bytes() == DATA
