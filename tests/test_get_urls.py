"""Plain-URL habits from wget, aria2c and pip: -i FILE, -P DIR, URL#sha256=, --extract, --header, .netrc.

Every test runs the real CLI as a subprocess against a loopback origin.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import tarfile

from tests.conftest import run_cli
from tests.test_jobs import job_id_from

KiB = 1 << 10


def blob(seed: int, size: int = 200 * KiB) -> bytes:
    return random.Random(seed).randbytes(size)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def test_input_file_with_mixed_hashes_and_outputs_one_wrong_hash(origin, home, tmp_path):
    a, b, c, d = blob(1), blob(2), blob(3), blob(4)
    for name, data in (("a.bin", a), ("b.bin", b), ("c.bin", c), ("d.bin", d)):
        origin.put(name, data)
    listing = "\n".join([
        "# aria2c-style input file",
        f"{origin.url_for('a.bin')} sha256={sha(a)}",
        f"{origin.url_for('b.bin')}",
        f"  out=renamed/bee.bin",
        f"  checksum=md5={md5(b)}",
        "",
        f"{origin.url_for('c.bin')}#sha256={sha(d)}",  # wrong: d's hash for c
        f"{origin.url_for('d.bin')}#md5={md5(d)} out=dee.bin",
    ]) + "\n"
    out = tmp_path / "out"

    proc = run_cli("get", "-i", "-", "-P", str(out), input=listing)

    assert proc.returncode == 4, proc.stderr
    assert (out / "a.bin").read_bytes() == a
    assert (out / "renamed" / "bee.bin").read_bytes() == b
    assert (out / "dee.bin").read_bytes() == d
    assert not (out / "c.bin").exists()
    assert sorted(p.name for p in out.iterdir()) == ["a.bin", "dee.bin", "renamed"]  # no .part left of c
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and errors[0].startswith("prefetch: error: c.bin ") and "sha256 mismatch" in errors[0], \
        proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(
        f"downloaded {p}" for p in (out / "a.bin", out / "renamed" / "bee.bin", out / "dee.bin")
    )


def test_several_urls_on_the_command_line_each_with_its_own_hash(origin, home, tmp_path):
    a, b = blob(5), blob(6)
    origin.put("a.bin", a)
    origin.put("b.bin", b)

    proc = run_cli("get", f"{origin.url_for('a.bin')}#sha256={sha(a)}", f"{origin.url_for('b.bin')}#md5={md5(b)}",
                   "-P", str(tmp_path / "dl"), "--json")

    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert [(r["name"], r["algorithm"], r["verified"]) for r in results] == [("a.bin", "sha256", True),
                                                                           ("b.bin", "md5", True)]
    assert (tmp_path / "dl" / "a.bin").read_bytes() == a and (tmp_path / "dl" / "b.bin").read_bytes() == b
    # the fragment is never sent to the server
    assert all("#" not in r.path for r in origin.requests)


def test_input_file_from_a_path_in_a_background_job(origin, home, tmp_path):
    a = blob(7)
    origin.put("a.bin", a)
    listing = tmp_path / "urls.txt"
    listing.write_text(f"{origin.url_for('a.bin')} sha256={sha(a)} out=x.bin\n")

    started = run_cli("get", "-i", str(listing), "-P", str(tmp_path / "bg"), "-b", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    listing.unlink()  # read at start: the job does not need the file any more
    waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60")

    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (tmp_path / "bg" / "x.bin").read_bytes() == a


def test_bad_input_files_are_one_usage_line_naming_the_line(origin, home, tmp_path):
    cases = {
        "not a url\n": "<stdin>:1: expected a URL",
        "  out=x\n": "<stdin>:1: an option line before any URL",
        "http://127.0.0.1:1/a.bin color=red\n": "<stdin>:1: unknown option 'color=red'",
        "http://127.0.0.1:1/a.bin\thttp://127.0.0.1:1/b.bin\n": "<stdin>:1: one URL per line",
        "# only a comment\n": "<stdin>: no URLs",
        "http://127.0.0.1:1/a.bin sha256=abc\n": "sha256",
        "http://127.0.0.1:1/a.bin\nhttp://127.0.0.1:2/a.bin\n": "would both be saved as",
    }
    for text, expected in cases.items():
        proc = run_cli("get", "-i", "-", "-P", str(tmp_path), input=text)
        assert proc.returncode == 2, (text, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("prefetch: error:") and expected in lines[0], (text, lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    missing = run_cli("get", "-i", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and "cannot read the input file" in missing.stderr


def make_tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_url_archives_into_extract_to(origin, home, tmp_path):
    archive = make_tar({"pkg/a.txt": b"alpha", "pkg/sub/b.txt": b"beta"})
    xz = make_tar({"other/c.txt": b"gamma"}, mode="w:xz")
    origin.put("pkg.tar.gz", archive)
    origin.put("other.tar.xz", xz)
    into = tmp_path / "unpacked"

    proc = run_cli("get", f"{origin.url_for('pkg.tar.gz')}#sha256={sha(archive)}", origin.url_for("other.tar.xz"),
                   "-P", str(tmp_path / "dl"), "--extract", "--extract-to", str(into))

    assert proc.returncode == 0, proc.stderr
    assert (into / "pkg" / "a.txt").read_bytes() == b"alpha"
    assert (into / "pkg" / "sub" / "b.txt").read_bytes() == b"beta"
    assert (into / "other" / "c.txt").read_bytes() == b"gamma"
    assert (tmp_path / "dl" / "pkg.tar.gz").read_bytes() == archive  # the archive is kept
    assert f"extracted  {into / 'pkg'}" in proc.stdout.splitlines()
    assert sorted(p.name for p in into.iterdir()) == ["other", "pkg"]  # no temp dirs left


def test_extract_defaults_to_beside_the_file_and_unsafe_archives_leave_nothing(origin, home, tmp_path):
    good = make_tar({"data/x.txt": b"x"}, mode="w:bz2")
    evil = make_tar({"../escape.txt": b"owned"})
    origin.put("good.tar.bz2", good)
    origin.put("evil.tar.gz", evil)
    dl = tmp_path / "dl"

    ok = run_cli("get", origin.url_for("good.tar.bz2"), "-P", str(dl), "--extract")
    bad = run_cli("get", origin.url_for("evil.tar.gz"), "-P", str(dl), "--extract")

    assert ok.returncode == 0, ok.stderr
    assert (dl / "data" / "x.txt").read_bytes() == b"x"
    assert bad.returncode == 6, bad.stderr
    assert not (tmp_path / "escape.txt").exists()
    assert sorted(p.name for p in dl.iterdir()) == ["data", "good.tar.bz2"]  # neither evil.tar.gz nor its .part


def test_extract_is_for_urls_only(home):
    proc = run_cli("get", "mnist", "--extract")
    assert proc.returncode == 2 and "--extract applies to URL downloads" in proc.stderr


SECRET = "s3cr3t-token-value"


def test_header_reaches_the_server_and_is_never_logged_or_stored(origin, home, tmp_path):
    data = blob(8, 600 * KiB)
    origin.put("private.bin", data)
    origin.rate = 400 * KiB  # long enough for progress lines in the log
    out = tmp_path / "private.bin"

    started = run_cli("get", origin.url_for("private.bin"), "-o", str(out), "-b",
                      "--header", f"Authorization: Bearer {SECRET}", "--header", f"X-Api-Key: {SECRET}-2",
                      "--connections", "2")
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    waited = run_cli("wait", job, "--timeout", "60")
    status = run_cli("status", job, "--json")

    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert out.read_bytes() == data
    data_requests = origin.data_requests("private.bin")
    assert data_requests and all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in data_requests)
    assert all(r.headers.get("X-Api-Key") == f"{SECRET}-2" for r in data_requests)
    state = home / ".prefetch" / "state"
    stored = {p: p.read_text(errors="replace") for p in state.rglob("*") if p.is_file()}
    assert any(p.suffix == ".log" for p in stored) and any(p.suffix == ".json" for p in stored)
    for path, text in stored.items():
        assert SECRET not in text, path
    record = json.loads((state / "jobs" / f"{job}.json").read_text())
    assert record["request"]["headers"] == ["Authorization", "X-Api-Key"]  # names only
    for text in (started.stdout, started.stderr, waited.stdout, waited.stderr, status.stdout, status.stderr):
        assert SECRET not in text
    assert json.loads(status.stdout)  # valid JSON, and no secret in it


def test_a_resumed_job_cannot_send_headers_it_never_stored(origin, home, tmp_path):
    # p.bin is not on the origin: the job fails (404), and could be resumed later
    started = run_cli("get", origin.url_for("p.bin"), "-o", str(tmp_path / "p.bin"), "-b",
                      "--header", f"Authorization: Bearer {SECRET}")
    job = job_id_from(started.stdout)
    run_cli("wait", job, "--timeout", "60")

    resumed = run_cli("resume", job)

    assert resumed.returncode == 2
    assert "never stored" in resumed.stderr and SECRET not in resumed.stderr


def test_foreground_header_is_not_printed(origin, home, tmp_path):
    origin.put("f.bin", blob(10))
    proc = run_cli("get", origin.url_for("f.bin"), "-o", str(tmp_path / "f.bin"), "--header", f"X-Token: {SECRET}")
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert origin.data_requests("f.bin")[0].headers.get("X-Token") == SECRET


def test_bad_header_is_a_usage_error(home, tmp_path):
    for bad in ("NoColon", "Bad Name: x", "X-Ok: a\rb"):
        proc = run_cli("get", "http://127.0.0.1:1/x.bin", "-o", str(tmp_path / "x"), "--header", bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert proc.stderr.startswith("prefetch: error: --header"), proc.stderr


def test_netrc_answers_a_server_that_requires_basic_auth(origin, home, tmp_path):
    data = blob(11)
    origin.put("locked.bin", data)
    origin.basic_auth = ("alice", "pa55-word")
    out = tmp_path / "locked.bin"

    denied = run_cli("get", origin.url_for("locked.bin"), "-o", str(out))
    assert denied.returncode == 3 and "401" in denied.stderr, denied.stderr
    netrc = home / ".netrc"
    netrc.write_text("machine 127.0.0.1\n  login alice\n  password pa55-word\n")
    netrc.chmod(0o600)
    started = run_cli("get", origin.url_for("locked.bin"), "-o", str(out), "-b")
    waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60")

    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert out.read_bytes() == data
    state = home / ".prefetch" / "state"
    for path in state.rglob("*"):
        if path.is_file():
            assert "pa55-word" not in path.read_text(errors="replace"), path


def test_credentials_are_not_sent_to_another_host_on_redirect(home, tmp_path):
    from tests.origin import OriginServer

    data = blob(12)
    with OriginServer() as first, OriginServer() as second:
        second.put("moved.bin", data)
        first.set_redirect("moved.bin", second.url_for("moved.bin"))
        proc = run_cli("get", first.url_for("moved.bin"), "-o", str(tmp_path / "moved.bin"),
                       "--header", f"Authorization: Bearer {SECRET}", "--header", "X-Other: kept")

        assert proc.returncode == 0, proc.stderr
        assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in first.requests)
        assert second.requests and all("Authorization" not in r.headers for r in second.requests)
        assert all(r.headers.get("X-Other") == "kept" for r in second.requests)


def test_header_authorization_wins_over_netrc(origin, home, tmp_path):
    origin.put("both.bin", blob(13))
    origin.basic_auth = ("bob", "right")
    netrc = home / ".netrc"
    netrc.write_text("machine 127.0.0.1 login bob password wrong\n")
    netrc.chmod(0o600)
    import base64

    token = base64.b64encode(b"bob:right").decode()
    proc = run_cli("get", origin.url_for("both.bin"), "-o", str(tmp_path / "both.bin"),
                   "--header", f"Authorization: Basic {token}")
    assert proc.returncode == 0, proc.stderr


def test_python_api_takes_url_entries_rates_and_headers(origin, home, tmp_path):
    import prefetch

    a, b = blob(14), blob(15)
    origin.put("a.bin", a)
    origin.put("b.bin", b)
    results = prefetch.ensure([], urls=[{"url": origin.url_for("a.bin"), "sha256": sha(a), "out": "A.bin"},
                                        origin.url_for("b.bin") + f"#md5={md5(b)}"],
                              output_dir=tmp_path / "api", limit_rate="4M", headers={"X-Team": SECRET})
    assert [r.status for r in results] == ["downloaded", "downloaded"]
    assert (tmp_path / "api" / "A.bin").read_bytes() == a and (tmp_path / "api" / "b.bin").read_bytes() == b
    assert all(r.headers.get("X-Team") == SECRET for r in origin.requests)

    origin.put("c.bin", blob(16))
    job = prefetch.ensure(origin.url_for("c.bin"), background=True, output=tmp_path / "c.bin",
                          headers=[f"X-Team: {SECRET}"])
    prefetch.wait(job.id, timeout=60)
    assert (tmp_path / "c.bin").read_bytes() == blob(16)
    assert origin.data_requests("c.bin")[-1].headers.get("X-Team") == SECRET
    assert SECRET not in json.dumps(prefetch.status(job.id).request)


def test_background_url_downloads_land_where_the_foreground_would(origin, home, tmp_path):
    a, b = blob(17), blob(18)
    origin.put("here.bin", a)
    origin.put("there.bin", b)
    listing = f"{origin.url_for('there.bin')}#sha256={sha(b)}\n  out=sub/t.bin\n"

    here = run_cli("get", origin.url_for("here.bin"), "-b", "--limit-rate", "8M", cwd=tmp_path)
    there = run_cli("get", "-i", "-", "-P", "rel", "-b", input=listing, cwd=tmp_path)
    for started in (here, there):
        assert started.returncode == 0, started.stderr
        waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60")
        assert waited.returncode == 0, waited.stdout + waited.stderr

    assert (tmp_path / "here.bin").read_bytes() == a  # the caller's directory, not the jobs dir
    assert (tmp_path / "rel" / "sub" / "t.bin").read_bytes() == b
    status = json.loads(run_cli("status", job_id_from(here.stdout), "--json").stdout)
    assert "--limit-rate 8M" in status["jobs"][0]["command"], status
