"""``prefetch wait URL`` (and ``prefetch.wait(URL)``, fourteenth sitting) for a ``get -b
--content-disposition`` job: the job put the file under its server's name, and wait looked for
it under the URL's, saying "not in place (out/777) and no job is fetching it", exit 1, right
after the same wait printed "done (1 file in place)". It now finds the file where the job's own
record says the job placed it. A real nginx serves the header."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_jobs import job_id_from, stop_leftover_workers  # noqa: F401 - autouse fixture

DATA = b"served name " * 40_000


@pytest.fixture
def nginx(tmp_path):
    root = tmp_path / "www"
    (root / "files").mkdir(parents=True)
    (root / "files" / "777").write_bytes(DATA)
    location = "location = /files/777 { add_header Content-Disposition 'attachment; filename=\"big.bin\"'; }"
    with NginxServer(root, location=location) as server:
        yield server


def test_wait_for_the_url_of_a_job_that_named_its_file_by_the_server(nginx, home, tmp_path):
    url = nginx.url_for("files/777")
    out = tmp_path / "out"
    started = run_cli("get", url, "--content-disposition", "-P", str(out), "-b", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)

    waited = run_cli("wait", url, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (out / "big.bin").read_bytes() == DATA and not (out / "777").exists()
    assert "not in place" not in waited.stderr, waited.stderr

    code = "import prefetch, sys\nprefetch.wait(sys.argv[1], progress=False)\nprint('ok')\n"
    api = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert api.returncode == 0 and api.stdout.strip() == "ok", api.stderr

    (out / "big.bin").unlink()  # (gone since: wait says so, naming where the job put it)
    gone = run_cli("wait", url, cwd=tmp_path, timeout=120)
    assert gone.returncode == 1 and str(out / "big.bin") in gone.stderr, gone.stderr
    assert job  # (the job's record is what names big.bin)
