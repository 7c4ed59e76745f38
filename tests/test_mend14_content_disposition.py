"""``get URL --content-disposition``: a link that names no file (Figshare's
``/ndownloader/files/12345``, OSF's ``/download``) is saved under the name its server's
``Content-Disposition`` gives (``filename*=`` first, then ``filename=``), as wget
``--content-disposition`` and curl ``-OJ`` do; without the option nothing changes. The name is
hostile input: only its last component, inside the folder chosen, never through a link; a bad one
keeps the URL's name with one note, and never fails the download. A real nginx serves the headers."""

from __future__ import annotations

import hashlib
import json
import os
import signal

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_jobs import job_id_from, poll, stop_leftover_workers  # noqa: F401 - autouse fixture

FILES = {  # path under the server root -> its Content-Disposition ("" : none)
    "ndownloader/files/12345": "attachment; filename=\"train data.csv\"",
    "abcd/download": "attachment; filename=\"x.csv\"; filename*=UTF-8''%E6%95%B0%E6%8D%AE.csv",
    "store/obj1": "attachment; filename=../../escape.txt",  # (reached through a redirect, as Figshare's S3)
    "h/dot": "attachment; filename=\".bashrc\"",
    "h/dots": "attachment; filename=\"..\"",
    "h/back": "attachment; filename=\"a\\\\b.txt\"",
    "h/ctl": "attachment; filename=\"a\tb.txt\"",
    "h/long": "attachment; filename=\"" + "n" * 300 + ".txt\"",
    "h/empty": "attachment; filename=\"\"",
    "h/none": "",
    "h/link": "attachment; filename=\"victim.txt\"",
    "h/dup": "attachment; filename=\"train data.csv\"",  # (the name files/12345's server gives too)
}


def _location() -> str:
    lines = ["location = /ndownloader/files/obj1 { return 302 /store/obj1; }"]
    for path, value in FILES.items():
        if value:
            quoted = value.replace("\\", "\\\\").replace("'", "\\'")
            lines.append(f"location = /{path} {{ add_header Content-Disposition '{quoted}'; }}")
    return "\n".join(lines)


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "www"
    data = {}
    for i, path in enumerate(FILES):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        data[path] = f"{path} {i}\n".encode() * 100
        (root / path).write_bytes(data[path])
    with NginxServer(root, location=_location()) as nginx:
        yield nginx, data


def test_the_servers_name_with_the_option_and_the_urls_without(served, home, tmp_path):
    nginx, data = served
    urls = [nginx.url_for(p) for p in ("ndownloader/files/12345", "abcd/download", "ndownloader/files/obj1")]
    out = tmp_path / "out"
    got = run_cli("get", *urls, "--content-disposition", "-P", str(out), "-q", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (out / "train data.csv").read_bytes() == data["ndownloader/files/12345"]
    assert (out / "数据.csv").read_bytes() == data["abcd/download"]  # (filename*= before filename=)
    assert (out / "escape.txt").read_bytes() == data["store/obj1"]  # (its last component, inside -P)
    assert sorted(p.name for p in out.iterdir()) == sorted(["train data.csv", "数据.csv", "escape.txt"])
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path.parent / "escape.txt").exists()

    plain = tmp_path / "plain"
    got = run_cli("get", *urls, "-P", str(plain), "-q", cwd=tmp_path)  # without the option: the URLs' names
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in plain.iterdir()) == ["12345", "download", "obj1"]


def test_a_hostile_name_keeps_the_urls_with_one_note_and_never_a_link(served, home, tmp_path):
    nginx, data = served
    out = tmp_path / "out"
    out.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours\n")
    (out / "victim.txt").symlink_to(outside)  # a link prefetch did not create, under the served name
    names = ["dot", "dots", "back", "ctl", "long", "empty", "none"]
    got = run_cli("get", *(nginx.url_for(f"h/{n}") for n in names), "--content-disposition", "-P", str(out),
                  cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    for name in names:  # each under its URL's name, whole
        assert (out / name).read_bytes() == data[f"h/{name}"], name
    notes = [line for line in got.stderr.splitlines() if "--content-disposition:" in line]
    assert len(notes) == len(names), got.stderr
    assert "Traceback" not in got.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "victim.txt"])

    linked = run_cli("get", nginx.url_for("h/link"), "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert outside.read_bytes() == b"not yours\n"  # never written through
    # (the user's link is theirs: the served name is not used over it, the URL's is; before the
    # fifteenth sitting's review this was exit 5, as for any final path, a refusal the server chose)
    assert linked.returncode == 0 and "already has 'victim.txt': a link" in linked.stderr, linked.stderr
    assert (out / "link").read_bytes() == data["h/link"]
    assert (out / "victim.txt").is_symlink()
    assert "Traceback" not in linked.stderr


def test_a_name_another_file_of_the_command_takes_keeps_the_urls(served, home, tmp_path):
    nginx, data = served
    out = tmp_path / "out"
    got = run_cli("get", nginx.url_for("ndownloader/files/12345"), nginx.url_for("h/dup"), "--content-disposition",
                  "-P", str(out), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (out / "train data.csv").read_bytes() == data["ndownloader/files/12345"]
    assert (out / "dup").read_bytes() == data["h/dup"]
    assert "another file's of this command" in got.stderr, got.stderr


def test_sha256_and_an_input_list(served, home, tmp_path):
    nginx, data = served
    good = hashlib.sha256(data["ndownloader/files/12345"]).hexdigest()
    out = tmp_path / "out"
    got = run_cli("get", nginx.url_for("ndownloader/files/12345"), "--sha256", good, "--content-disposition",
                  "-P", str(out), "-q", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (out / "train data.csv").read_bytes() == data["ndownloader/files/12345"]
    bad = run_cli("get", nginx.url_for("abcd/download"), "--sha256", good, "--content-disposition", "-P",
                  str(tmp_path / "bad"), cwd=tmp_path)
    assert bad.returncode == 4, bad.stderr
    assert not (tmp_path / "bad" / "数据.csv").exists()

    listing = tmp_path / "list.txt"  # out= names its own file; the other line is named by its server
    listing.write_text(f"{nginx.url_for('abcd/download')}\n{nginx.url_for('ndownloader/files/obj1')} out=mine.txt\n")
    got = run_cli("get", "-i", str(listing), "--content-disposition", "-P", str(tmp_path / "lst"), "-q", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in (tmp_path / "lst").iterdir()) == ["mine.txt", "数据.csv"]


def test_a_background_job_keeps_the_option_and_its_restart_finds_its_part(home, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    data = hashlib.sha256(b"cd").digest() * (4 << 15)  # 4 MiB
    (root / "files").mkdir()
    (root / "files" / "777").write_bytes(data)
    location = "location = /files/777 { add_header Content-Disposition 'attachment; filename=\"big.bin\"'; }"
    out = tmp_path / "out"
    state = out / "big.bin.part.json"

    def kept() -> list[tuple[int, int]]:
        try:
            return [(a, b) for a, b in json.loads(state.read_text())["done"]]
        except (OSError, ValueError, KeyError):
            return []

    with NginxServer(root, limit_rate="1m", location=location) as nginx:
        started = run_cli("get", nginx.url_for("files/777"), "--content-disposition", "--connections", "1", "-P",
                          str(out), "-b", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        job = job_id_from(started.stdout)
        record = json.loads(run_cli("status", job, "--json").stdout)["jobs"][0]
        assert " --content-disposition " in record["command"] + " ", record["command"]

        poll(lambda: sum(b - a for a, b in kept()) >= 1 << 20, timeout=60, what="1 MiB of big.bin recorded")
        os.kill(record["pid"], signal.SIGKILL)
        ranges = kept()
        run_cli("status", job)  # (the dead worker noticed)
        resumed = run_cli("resume", job, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert run_cli("wait", job, timeout=120).returncode == 0, run_cli("log", job).stdout
        assert (out / "big.bin").read_bytes() == data
        files = json.loads(run_cli("status", job, "--json").stdout)["jobs"][0]["files"]
        assert [f["path"] for f in files] == [str(out / "big.bin")], files  # (where it landed, not out/777)
        assert not (out / "777").exists() and not (out / "777.part").exists()
        served = nginx.served()
        # The first run's name came with its download's first request (tests/test_links_once.py); the
        # restart, which has a .part to resume, asks for it apart, once.
        probes = [i for i, row in enumerate(served) if row[3] == "bytes=0-0"]
        assert len(probes) == 1 and served[0][3] == "bytes=0-", served
        again = sum(row[0] for row in served[probes[0] + 1:])  # what the restart fetched after its probe
        kept_bytes = sum(b - a for a, b in ranges)
        assert again <= len(data) - kept_bytes + (64 << 10), (again, kept_bytes, served)  # (+ its sample checks)


def test_the_python_api_takes_it(served, home, tmp_path):
    import subprocess
    import sys

    nginx, data = served
    code = ("import prefetch, sys\n"
            "r = prefetch.ensure(sys.argv[1], content_disposition=True, output_dir=sys.argv[2], progress=False)\n"
            "print(r[0].path)\n")
    done = subprocess.run([sys.executable, "-c", code, nginx.url_for("ndownloader/files/12345"), str(tmp_path / "api")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "api" / "train data.csv")
    assert (tmp_path / "api" / "train data.csv").read_bytes() == data["ndownloader/files/12345"]


def test_not_with_torch_hub(home, tmp_path):
    refused = run_cli("get", "http://127.0.0.1:9/tiny-00000000.pth", "--torch-hub", "--content-disposition",
                      cwd=tmp_path)
    assert refused.returncode == 2 and "--content-disposition" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_lists_names_are_asked_for_together(served, home, tmp_path):
    """Each link's name costs a request before its download: a list's are asked several at a time
    (each on its own connection), not one after another on one."""
    nginx, data = served
    paths = ["ndownloader/files/12345", "abcd/download", "h/dot", "h/dots", "h/back", "h/ctl", "h/none", "h/empty"]
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{nginx.url_for(p)}\n" for p in paths))
    got = run_cli("get", "-i", str(listing), "--content-disposition", "-P", str(tmp_path / "out"), "-q", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    probes = [row for row in nginx.served() if row[3] == "bytes=0-0"]
    assert len(probes) == len(paths), probes
    assert len({row[2] for row in probes}) > 1, probes  # (connections: one alone when asked in turn)


@pytest.mark.parametrize("where", ["no such name", "nothing listening"])
def test_a_name_request_that_cannot_connect_is_a_note_and_the_download_says_why(home, tmp_path, where):
    """The name's first request fails before any answer (a name that does not resolve, as on a
    machine without internet, or a refused connection): one note, then the download's own one
    line and exit 3, never an internal error."""
    import socket

    if where == "no such name":
        url, env = "http://data.example.org/ndownloader/files/12345", {"PREFETCH_RESOLVE": "data.example.org=fail"}
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url, env = f"http://127.0.0.1:{port}/ndownloader/files/12345", {}
    got = run_cli("get", url, "--content-disposition", "-P", str(tmp_path / "out"), "--timeout", "2",
                  cwd=tmp_path, env={**os.environ, **env})
    assert got.returncode == 3, got.stderr
    assert "internal error" not in got.stderr and "Traceback" not in got.stderr, got.stderr
    assert "--content-disposition: the server could not be asked" in got.stderr + got.stdout
    assert [line for line in got.stderr.splitlines() if line.startswith("prefetch: error:")][-1:], got.stderr
