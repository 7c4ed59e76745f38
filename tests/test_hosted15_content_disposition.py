"""``--content-disposition``'s rough edges (a real nginx sends the header):

* ``-o DIR/`` (or ``-o`` an existing folder) names a folder, not the file: the server's name is
  used there too (before: the URL's, ``12345``);
* a ``-b`` job's record shows the server's name as its path, and ``status`` as its name, once the
  name is known (before: the URL's, ``12345``, in the table for ever and as the path until the
  file landed);
* a ``.part`` an earlier run left under the URL's name (its name probe failed, the download
  began under the URL's name, then stopped) is resumed under the server's name once the probe
  answers, not left there for ever beside a second download from byte 0.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_jobs import job_id_from, poll, stop_leftover_workers  # noqa: F401 - autouse fixture

PATH = "ndownloader/files/12345"
SERVED = "train data.csv"
DATA = random.Random(1515).randbytes(3_000_000)


@pytest.fixture
def nginx(tmp_path):
    root = tmp_path / "www"
    (root / PATH).parent.mkdir(parents=True)
    (root / PATH).write_bytes(DATA)
    location = f"location = /{PATH} {{ add_header Content-Disposition 'attachment; filename=\"{SERVED}\"'; }}"
    with NginxServer(root, location=location, limit_rate="400k") as server:
        yield server


def test_o_a_folder_takes_the_servers_name(nginx, home, tmp_path):
    url = nginx.url_for(PATH)
    for target, folder in (("new/", tmp_path / "new"), (str(tmp_path / "there"), tmp_path / "there")):
        if folder.name == "there":
            folder.mkdir()
        got = run_cli("get", url, "--content-disposition", "-o", str(tmp_path) + "/new/" if target == "new/" else target,
                      "-q", cwd=tmp_path)
        assert got.returncode == 0, got.stderr
        assert os.listdir(folder) == [SERVED], os.listdir(folder)
        assert (folder / SERVED).read_bytes() == DATA
    plain = run_cli("get", url, "-o", str(tmp_path / "plain") + "/", "-q", cwd=tmp_path)  # (without the option)
    assert plain.returncode == 0 and os.listdir(tmp_path / "plain") == ["12345"], plain.stderr
    named = run_cli("get", url, "--content-disposition", "-o", str(tmp_path / "mine.csv"), "-q", cwd=tmp_path)
    assert named.returncode == 0 and (tmp_path / "mine.csv").read_bytes() == DATA  # (-o a file: that name)


def test_a_jobs_record_shows_the_servers_name_while_it_downloads(nginx, home, tmp_path):
    out = tmp_path / "out"
    started = run_cli("get", nginx.url_for(PATH), "--content-disposition", "-P", str(out), "-b")
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)

    def downloading():
        (record,) = json.loads(run_cli("status", job, "--json").stdout)["jobs"]
        (entry,) = record["files"]
        return entry if entry["state"] == "downloading" and entry["bytes"] > 0 else None

    entry = poll(downloading, timeout=60, what="the job downloading")
    assert entry["path"] == str(out / SERVED), entry
    table = run_cli("status", job).stdout  # (the FILE column: the server's name, not 12345)
    assert SERVED in table and "12345" not in table, table
    assert run_cli("wait", job, "--timeout", "60").returncode == 0
    assert (out / SERVED).read_bytes() == DATA


def test_a_part_left_under_the_urls_name_is_resumed_under_the_servers(nginx, home, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "prefetch", "get", nginx.url_for(PATH), "-P", str(out), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        poll(lambda: (out / "12345.part.json").exists() and (out / "12345.part").stat().st_size > 0, timeout=60,
             what="a first run's .part")
        poll(lambda: b'"done": [\n  [' in (out / "12345.part.json").read_bytes(), timeout=60,
             what="bytes in the state")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert sorted(os.listdir(out)) == ["12345.part", "12345.part.json"]
    sent_before = sum(row[0] for row in nginx.served())

    got = run_cli("get", nginx.url_for(PATH), "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert os.listdir(out) == [SERVED], os.listdir(out)  # no 12345.part left for ever
    assert (out / SERVED).read_bytes() == DATA
    assert "resuming from 12345.part" in got.stderr, got.stderr
    sent_after = sum(row[0] for row in nginx.served()) - sent_before
    assert sent_after < len(DATA), (sent_after, len(DATA))  # (the bytes on disk were not fetched again)


def test_a_long_list_says_the_first_names_only(home, tmp_path):
    """Each renamed file's ``saved as`` note (what a job's record reads) is shown for the first
    files only: a list of hundreds of links is not hundreds of lines before its summary."""
    root = tmp_path / "www"
    (root / "f").mkdir(parents=True)
    locations = []
    for i in range(30):
        (root / "f" / str(i)).write_bytes(b"x" * 1000)
        locations.append(f"location = /f/{i} {{ add_header Content-Disposition 'attachment; filename=\"n{i}.csv\"'; }}")
    listing = tmp_path / "list.txt"
    with NginxServer(root, location="\n".join(locations)) as server:
        listing.write_text("".join(server.url_for(f"f/{i}") + "\n" for i in range(30)))
        got = run_cli("get", "-i", str(listing), "--content-disposition", "-P", str(tmp_path / "out"), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert sorted(os.listdir(tmp_path / "out")) == sorted(f"n{i}.csv" for i in range(30))
    said = [line for line in got.stderr.splitlines() if "--content-disposition: saved as" in line]
    assert 1 <= len(said) <= 8, got.stderr
