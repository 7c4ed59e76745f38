"""A ModelScope model's folder walk (``repo/files``, listed again folder by folder where the server
cuts a listing at 3000 entries) was under no file limit: ``FOLDER_DEPTH`` and ``MAX_CUT_LISTINGS``
bound the cut listings, but a cut listing naming thousands of folders, each listing 2999 new files,
was walked to the end (9 million entries held in memory). The entries the walk keeps (files and
folders: every answer but the cut ones) now count against ``PREFETCH_HUB_MAX_FILES``, as a Hugging
Face listing's and a ModelScope dataset's pages do; and a ModelScope listing answer over 16 MiB is
refused unparsed. Real CLI, a local
hostile hub on 127.0.0.1, no client library."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.ms_origin import use_endpoint
from tests.test_hf_lfs_from import hubs  # noqa: F401 - a fixture
from tests.test_many_hostile_hub import JsonApi

NOT_FOUND = ("404 Not Found", {"Code": 404, "Data": None, "Message": "nf", "Success": False}, "")


def _blob(path: str) -> dict:
    return {"Name": path.rpartition("/")[2], "Path": path, "Type": "blob", "Size": 1, "Sha256": ""}


def _tree(path: str) -> dict:
    return {"Name": path.rpartition("/")[2], "Path": path, "Type": "tree", "Size": 0, "Sha256": ""}


def _ok(files: list) -> tuple[str, object, str]:
    return "200 OK", {"Code": 200, "Data": {"Files": files}, "Message": "", "Success": True}, ""


class ManyFoldersMs(JsonApi):
    """A model whose listing is cut at the limit. ``deeper=False``: its top folder holds 3000
    folders, each listing 2999 files (never cut): 9 million files. ``deeper=True``: every folder's
    listing is cut too, and each holds two folders, one level deeper, without end (the walk's
    depth or cut-listing bound stops that one, as before)."""

    def __init__(self, deeper: bool) -> None:
        from prefetch.ms.api import TRUNCATION_LIMIT

        self.limit, self.deeper, self.requests = TRUNCATION_LIMIT, deeper, 0
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        self.requests += 1
        if "/repo/files" not in target:
            return NOT_FOUND
        query = parse_qs(urlsplit(target).query)
        root = query.get("Root", [""])[0]
        prefix = f"{root}/" if root else ""
        if query.get("Recursive") == ["True"]:
            if root and not self.deeper:
                return _ok([_blob(f"{prefix}f{i}.bin") for i in range(self.limit - 1)])  # under the limit
            return _ok([_blob(f"{prefix}x/f{i}.bin") for i in range(self.limit)])  # cut: listed again by folder
        if root and self.deeper:
            return _ok([_tree(f"{prefix}a"), _tree(f"{prefix}b")])
        return _ok([_tree(f"{prefix}d{i}") for i in range(self.limit)])


@pytest.mark.parametrize("deeper", [False, True])
def test_a_folder_walk_naming_ever_more_files_stops_at_the_limit_in_one_line(home, cli, monkeypatch, deeper):
    monkeypatch.setenv("PREFETCH_HUB_MAX_FILES", "20000")
    ms = ManyFoldersMs(deeper)
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://acme/many", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still listing after 60 s ({ms.requests} requests)")
    finally:
        ms.close()
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    if deeper:
        assert "a ModelScope endpoint?" in proc.stderr and ms.requests <= 2 * 257, (ms.requests, proc.stderr)
        return
    assert "more than 20,000 files" in proc.stderr and "PREFETCH_HUB_MAX_FILES" in proc.stderr, proc.stderr
    assert ms.requests == 2 + 6, ms.requests  # 3000 folders + 6 x 2999 files: the 6th folder passes 20,000
    assert not (home / "ms" / "models" / "acme--many" / "snapshots").exists()


@pytest.mark.parametrize("limit", [9000, 8999])
def test_the_limit_counts_the_repos_files_and_folders(home, cli, monkeypatch, limit):
    """3 folders of 2999 files: 9,000 entries (the 3,000 of the cut listing, named again, count
    once); a limit of 9,000 lists it whole and the file asked for is fetched, one less is exit 3."""
    monkeypatch.setenv("PREFETCH_HUB_MAX_FILES", str(limit))

    class Three(ManyFoldersMs):
        def answer(self, target):
            if "/repo?" in target:
                return "200 OK", 7, ""  # the file's one byte: "7"
            status, body, extra = super().answer(target)
            query = parse_qs(urlsplit(target).query)
            if "/repo/files" in target and query.get("Recursive") == ["False"]:
                body["Data"]["Files"] = body["Data"]["Files"][:3]
            return status, body, extra

    ms = Three(False)
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://acme/three", "--include", "d0/f0.bin", timeout=60)
    finally:
        ms.close()
    if limit < 9000:
        assert proc.returncode == 3 and "more than 8,999 files" in proc.stderr, proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    assert (home / "ms" / "models" / "acme--three" / "snapshots" / "master" / "d0" / "f0.bin").read_bytes() == b"7"


class HugeAnswerMs(JsonApi):
    """One listing answer of ~21 MiB (600,000 entries, fewer than the default file limit)."""

    def __init__(self) -> None:
        self.requests = 0
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        self.requests += 1
        if "/repo/files" not in target:
            return NOT_FOUND
        if parse_qs(urlsplit(target).query).get("Recursive") == ["True"]:
            return _ok([{"Path": f"f{i}.bin", "Size": 1} for i in range(600_000)])
        return _ok([])

    def _serve(self, conn, number: int) -> None:
        try:
            super()._serve(conn, number)
        except OSError:  # (the client read its 16 MiB and hung up: the rest was never read)
            pass


def test_a_listing_answer_of_more_than_16_mib_is_refused_unparsed(home, cli, monkeypatch):
    monkeypatch.delenv("PREFETCH_HUB_MAX_FILES", raising=False)
    ms = HugeAnswerMs()
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://acme/huge", timeout=60)
    finally:
        ms.close()
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "more than 16 MiB" in proc.stderr, proc.stderr


def test_lfs_from_lists_modelscope_under_the_same_limit_and_a_listing_past_it_costs_a_note(
        hubs, cli, monkeypatch):  # noqa: F811 - the fixture
    """``get hf://... --lfs-from ms://...`` lists the ModelScope repo too: under the same
    ``PREFETCH_HUB_MAX_FILES``, and past it that source is not used, the download goes on."""
    from tests.test_hf_lfs_from import FILES, _env
    from tests.test_hf import assert_offline_loads

    monkeypatch.setenv("PREFETCH_HUB_MAX_FILES", "2")  # the Hub repo's 2 files pass, ModelScope's 3 do not
    done = cli("get", "hf://acme/tiny", "--lfs-from", "ms://acme/tiny-ms")
    assert done.returncode == 0, done.stderr
    assert "--lfs-from ms://acme/tiny-ms not used" in done.stderr and "more than 2 files" in done.stderr, done.stderr
    assert_offline_loads(_env(), "acme/tiny", FILES)


class BigCutsMs(JsonApi):
    """Every ``Recursive=True`` answer is ``entries`` entries (over the cut: listed again by folder);
    every folder holds two folders, one level deeper: a walk that goes down to the depth bound."""

    def __init__(self, entries: int) -> None:
        import json

        self.requests = 0
        self.big = json.dumps({"Code": 200, "Data": {"Files": [{"Path": f"x/{i}", "Size": 1} for i in range(entries)]},
                               "Message": "", "Success": True}).encode()
        super().__init__()

    def _serve(self, conn, number: int) -> None:
        import json

        try:
            with conn:
                for head in self.heads(conn):
                    self.requests += 1
                    query = parse_qs(urlsplit(head.split(b"\r\n")[0].split()[1].decode()).query)
                    root = query.get("Root", [""])[0]
                    prefix = f"{root}/" if root else ""
                    data = self.big if query.get("Recursive") == ["True"] else json.dumps(_ok(
                        [_tree(f"{prefix}a"), _tree(f"{prefix}b")])[1]).encode()
                    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                                 f"\r\n\r\n".encode() + data)
        except OSError:  # (the client gave up on the listing)
            pass


def test_cut_answers_far_over_the_cut_stop_the_walk(home, cli, monkeypatch):
    """A real cut answer holds 3000 entries (256 of them: 768,000); answers of 100,000 again and
    again were read to the depth bound (130 answers; of 500,000 entries, 16 MiB, that took 28 s)."""
    monkeypatch.delenv("PREFETCH_HUB_MAX_FILES", raising=False)
    ms = BigCutsMs(100_000)
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://acme/cuts", timeout=60)
    finally:
        ms.close()
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "more than 768,000 entries in listings that are cut at 3000" in proc.stderr, proc.stderr
    assert ms.requests == 8 + 7, ms.requests  # 8 cut answers (800,000 entries) and the folder listings between


# The CLI, telling its peak resident memory at exit. /proc's VmHWM is this process's own: ru_maxrss
# carries over the forking process's (pytest's) size across exec.
_PEAK = """
import atexit, runpy, sys
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("peak KiB " + line.split()[1] + "\\n")
atexit.register(peak)
sys.argv = ["prefetch", *sys.argv[1:]]
runpy.run_module("prefetch", run_name="__main__", alter_sys=True)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")
def test_the_walk_holds_one_cut_answer_at_a_time(home, monkeypatch, tmp_path):
    """Each level of the walk kept its cut answer while it walked the folders below: 65 levels
    of a 500,000-entry answer took 8.5 GB (measured; such answers now stop the walk at the
    third). Measured here on the CLI's own process, with answers small enough to go down."""
    import sys

    monkeypatch.setenv("PREFETCH_HUB_MAX_FILES", "100000000")  # (only the depth bound stops this walk)
    ms = BigCutsMs(11_000)  # 65 of them: 715,000 entries, under the 768,000 real cut listings may hold
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = subprocess.run([sys.executable, "-c", _PEAK, "get", "ms://acme/deep"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    finally:
        ms.close()
    assert proc.returncode == 3 and "folders deep" in proc.stderr, proc.stderr
    assert ms.requests == 2 * 65, ms.requests  # 65 levels (0-64): a cut answer and a folder listing each
    peak = int(proc.stderr.split("peak KiB ")[1].split()[0])
    assert peak < 120_000, peak  # KiB: 36 MB here; 219 MB with every level's answer held (measured)
