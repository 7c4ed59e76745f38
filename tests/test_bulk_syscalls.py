"""What the bulk lane asks of the filesystem per chunk rather than per file (issue 19's loopback
row): a real ``prefetch get -i LIST`` against nginx, run under an audit hook (``sys.addaudithook``
in the child process) that counts the calls on the output folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.nginx import NginxServer
from tests.test_bulk import LANE_RANGE, _check, _files, _list

# The child: counts ``open`` of the output folder itself (os.open of a directory) and listings of
# it (``os.scandir``/``os.listdir``) made while the lane runs a chunk (``fetch_batch``, wrapped
# here: the chunks are counted too), then runs the CLI; the counts go to a JSON file at exit.
# (How many files the lane takes depends on the route judgement and the lane's pace, which a
# loaded machine moves: the tests hold the lane to its promises per chunk, whatever it took.)
_CHILD = r"""
import atexit, json, os, sys, threading
out, report = os.path.realpath(sys.argv[1]), sys.argv[2]
counts = {"open": 0, "list": 0, "chunks": 0}
inside = threading.local()
def hook(event, args):
    if not getattr(inside, "chunk", False):
        return
    if event == "open" and isinstance(args[0], (str, os.PathLike)) and os.path.realpath(args[0]) == out:
        counts["open"] += 1
    elif event in ("os.scandir", "os.listdir") and args[0] not in (None, -1) and not isinstance(args[0], int) \
            and os.path.realpath(args[0]) == out:
        counts["list"] += 1
sys.addaudithook(hook)
atexit.register(lambda: open(report, "w").write(json.dumps(counts)))
from prefetch.flow import file_batch
real = file_batch.fetch_batch
def counted(*args, **kwargs):
    counts["chunks"] += 1
    inside.chunk = True
    try:
        return real(*args, **kwargs)
    finally:
        inside.chunk = False
file_batch.fetch_batch = counted
from prefetch.cli import main
sys.argv = ["prefetch", *sys.argv[3:]]
sys.exit(main())
"""


def _run_counted(tmp_path: Path, count: int) -> tuple[dict, int]:
    """(the counts, files the lane placed) of ``get -i`` of ``count`` files."""
    files = _files(tmp_path / "www", count, 16 << 10)
    out = tmp_path / "out"
    report = tmp_path / "counts.json"
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(out), str(report), "get", "-i", str(listing),
                               "-P", str(out), "-q"], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, env=os.environ.copy())
        assert proc.returncode == 0, proc.stderr
        served = server.served()
    _check(out, files)
    lane = len([r for r in served if r[3] == LANE_RANGE])
    counts = json.loads(report.read_text())
    assert counts["chunks"] >= 1 and lane > 2 * counts["chunks"], (lane, counts)  # the lane took part, 3+ files a chunk
    return counts, lane


def test_the_lanes_renames_open_each_folder_once_a_chunk_not_once_a_file(home, tmp_path):
    """600 files: each chunk's renames are relative to its folder's fd, opened once for the chunk
    (and once more for its syncfs). (The check for it asked whether ``os.replace`` takes a
    ``dir_fd``, which Python never lists, so every rename went through ``safefs.replace``,
    opening the folder again: an open of the output folder per file the lane placed.)"""
    counts, lane = _run_counted(tmp_path, 600)
    assert counts["open"] <= 2 * counts["chunks"], f"the output folder was opened {counts['open']} times " \
        f"by {counts['chunks']} chunks of {lane} files"


def test_the_lanes_looks_list_each_folder_once_a_chunk(home, tmp_path):
    """600 files (chunks of 256): nothing at each file's names is seen from one listing of the
    folder per chunk, under the chunk's locks, instead of three ``lstat``s a file."""
    counts, lane = _run_counted(tmp_path, 600)
    assert counts["list"] >= counts["chunks"], f"the output folder was listed {counts['list']} times " \
        f"by {counts['chunks']} chunks of {lane} files"


def test_names_already_there_send_their_files_the_usual_way(home, tmp_path, cli):
    """With the looks from a listing: a final name, a ``.part``, a state record or a killed run's
    temp name already there keeps the file out of the lane (the usual path decides), and every
    file ends byte-exact, the planted final file replaced as the usual path does."""
    files = _files(tmp_path / "www", 300, 16 << 10)
    out = tmp_path / "out"
    out.mkdir()
    (out / "f0100.bin").write_bytes(b"old")  # (not ours, no record: fetched again and replaced)
    (out / "f0110.bin.part").write_bytes(files["f0110.bin"][:4096])
    (out / ".f0130.bin.part.json.x1.tmp").write_bytes(b"{")
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
        assert proc.returncode == 0, proc.stderr
        served = server.served()
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    usual = {Path(r[4].split()[1]).name for r in served if r[3] != LANE_RANGE}
    assert {"f0100.bin", "f0110.bin", "f0130.bin"} <= usual, usual


def test_a_link_planted_at_a_final_name_before_the_lanes_rename_is_left_alone(home, tmp_path, monkeypatch):
    """The lane's rename checks the final name relative to its folder's fd (no path walk a
    file): a symlink another process planted there between the chunk's looks and its renames is
    refused (not replaced, nothing written through it), as ``safefs.check_replaceable`` refuses
    it on the usual path; the other files are placed."""
    import hashlib as _hashlib

    import prefetch
    from prefetch.errors import PrefetchError
    from prefetch.model.events import EventKind
    from tests.bulk_origin import BulkOrigin

    monkeypatch.setenv("PREFETCH_BULK", "1")
    files = {f"f{i:03d}.bin": _hashlib.sha256(b"%d" % i).digest() * 512 for i in range(120)}
    out = tmp_path / "out"
    victim = tmp_path / "victim"
    victim.write_bytes(b"not prefetch's")
    planted: list[str] = []

    def meddle(event) -> None:
        if planted or event.kind != EventKind.DONE:
            return
        later = [name for name in files if (out / f"{name}.part").exists()]
        if len(later) < 2:
            return
        planted.append(later[-1])  # a file of the chunk being placed, not renamed yet
        (out / later[-1]).symlink_to(victim)

    with BulkOrigin(files) as origin:
        try:
            prefetch.ensure([origin.url_for(name) for name in files], output_dir=str(out), on_event=meddle,
                            progress=False)
        except PrefetchError:
            pass
        assert origin.lane(), "the lane took part"
    assert planted, "no final name met between the chunk's looks and its renames"
    (name,) = planted
    assert (out / name).is_symlink(), f"{name}: the planted link was replaced"
    assert victim.read_bytes() == b"not prefetch's", "nothing written through the link"
    for other in files:
        if other != name:
            assert (out / other).read_bytes() == files[other], other


def test_the_lanes_renames_take_a_free_final_name_without_a_look_first(home, tmp_path):
    """300 files: the lane renames a ``.part`` with ``renameat2(RENAME_NOREPLACE)``, which fails
    when something is at the final name, instead of an ``lstat`` of the final name and then a
    rename (two calls a file, and a moment between them); only where something is there does it
    look (``test_a_link_planted_at_a_final_name_before_the_lanes_rename_is_left_alone``)."""
    import re

    files = _files(tmp_path / "www", 300, 16 << 10)
    out = tmp_path / "out"
    trace = tmp_path / "trace"  # (-ff: a file a thread, no call cut in two by another thread's)
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        proc = subprocess.run(["strace", "-ff", "-qq", "-o", str(trace), "-e", "trace=newfstatat,renameat,renameat2",
                               sys.executable, "-m", "prefetch", "get", "-i", str(listing), "-P", str(out), "-q"],
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                              env=os.environ.copy())
        assert proc.returncode == 0, proc.stderr
        served = server.served()
    _check(out, files)
    lane = len([r for r in served if r[3] == LANE_RANGE])
    text = "".join(path.read_text() for path in tmp_path.glob("trace.*"))
    renamed = set(re.findall(r'renameat2\(\d+, "(f\d+\.bin)\.part", \d+, "f\d+\.bin", RENAME_NOREPLACE\) = 0', text))
    looked = set(re.findall(r'newfstatat\(\d+, "(f\d+\.bin)", ', text))  # (the lane's looks: relative to its folder)
    assert lane > 0 and len(renamed) >= lane - 8, (lane, len(renamed))  # (a file handed back takes the usual path)
    assert not renamed & looked, sorted(renamed & looked)[:5]
