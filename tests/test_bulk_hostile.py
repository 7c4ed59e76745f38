"""The bulk lane (engine/bulk.py, flow/file_batch.py) in front of hostile answers and planted names.

Every file the lane refuses is handled as the usual path handles it: the same exit code and
the same error lines as a run with ``PREFETCH_BULK=0``; every other file byte-exact; no final
name holding anything but its complete, correct file; nothing written through a link.
Each run proves the lane took part (requests pipelined on the origin's connections, which
the usual path never does for small files).
"""

from __future__ import annotations

import hashlib
import os

import pytest

from tests.bulk_origin import BulkOrigin

COUNT = 120
SIZE = 16 << 10


def _files() -> dict[str, bytes]:
    return {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * (SIZE // 32) for i in range(COUNT)}


def _listing(path, origin: BulkOrigin, files: dict[str, bytes], bad_hash: set[str] = frozenset(), *,
             hashes: bool = True):
    lines = []
    for name, data in files.items():
        digest = hashlib.sha256(data + (b"!" if name in bad_hash else b"")).hexdigest()
        lines.append(f"{origin.url_for(name)}{' sha256=' + digest if hashes or name in bad_hash else ''}\n")
    path.write_text("".join(lines))
    return path


def _errors(proc, out, origin) -> list[str]:
    return sorted(line.replace(str(out), "OUT").replace(f"127.0.0.1:{origin.port}", "HOST")
                  for line in proc.stderr.splitlines() if line.startswith("prefetch: error:"))


def _check(out, files: dict[str, bytes], skip: set[str]) -> None:
    for name, data in files.items():
        if name in skip:
            continue
        assert (out / name).read_bytes() == data, name
    for path in out.iterdir():
        if path.name in files and not path.is_symlink() and path.is_file():
            assert path.read_bytes() == files[path.name], f"{path.name}: a final name holds a wrong file"


def _plant(out, tmp_path) -> dict:
    """A symlink at one final name and at one .part name (to files outside), a stale .part."""
    out.mkdir()
    victims = {}
    for name, at in (("f080.bin", "f080.bin"), ("f081.bin", "f081.bin.part")):
        victim = tmp_path / f"victim-{name}-{out.name}"
        victim.write_bytes(b"not yours")
        (out / at).symlink_to(victim)
        victims[victim] = b"not yours"
    (out / "f082.bin.part").write_bytes(b"stale bytes of an earlier run")
    return victims


def _run(cli, tmp_path, tag: str, tricks: dict, *, bulk: bool, bad_hash=frozenset(), plant=False, hashes=True,
         output="-q"):
    files = _files()
    out = tmp_path / f"out-{tag}-{int(bulk)}"
    victims = _plant(out, tmp_path) if plant else {}
    with BulkOrigin(files, tricks) as origin:
        listing = _listing(tmp_path / f"list-{tag}-{int(bulk)}.txt", origin, files, bad_hash, hashes=hashes)
        env = {**os.environ, "PREFETCH_BULK": "1" if bulk else "0"}
        proc = cli("get", "-i", str(listing), "-P", str(out), "--retries", "1", output, env=env)
        errors = _errors(proc, out, origin)
        pipelined = origin.pipelined(), origin.lane(), {name: origin.lane(name) for name in tricks}
    for victim, data in victims.items():
        assert victim.read_bytes() == data, "nothing written through a link prefetch did not create"
    return proc, out, files, errors, pipelined


IN_STEP = {"f070.bin": "404", "f071.bin": "portal", "f072.bin": "redirect", "f073.bin": "once-range",
           "f074.bin": "once-gzip"}


def test_refused_answers_in_step_and_planted_names_are_handled_as_the_usual_path_does(home, tmp_path, cli):
    """A 404, a portal page, a redirect, a 206 of another range, a gzip body, a wrong sha256,
    symlinks at a final and a .part name, a stale .part: the lane hands each back and goes on;
    exit code and error lines as without the lane; all other files byte-exact. No hash but the
    wrong one: the answers' own checks (``check_response``) must refuse the pages."""
    bad = {"f075.bin"}
    lane, out, files, errors, pipelined = _run(cli, tmp_path, "step", IN_STEP, bulk=True, bad_hash=bad, plant=True,
                                               hashes=False)
    usual, out0, _, errors0, pipelined0 = _run(cli, tmp_path, "step", IN_STEP, bulk=False, bad_hash=bad, plant=True,
                                               hashes=False)
    (ahead, lane_asked, tricked), (ahead0, lane_asked0, _) = pipelined, pipelined0
    assert ahead > 20 and lane_asked > 60, "the lane pipelined the list's requests"
    assert all(tricked.values()), f"the lane met every trick: {tricked}"
    assert ahead0 == 0 and lane_asked0 == 0
    assert lane.returncode == usual.returncode != 0, (lane.stderr, usual.stderr)
    assert errors == errors0, (errors, errors0)
    failed = {"f070.bin", "f071.bin", "f075.bin"}  # 404, portal, wrong hash
    assert all(any(n in e for e in errors) for n in failed), errors
    _check(out, files, skip=failed | {"f080.bin", "f081.bin"})
    for name in failed:
        assert not (out / name).exists() and not (out / name).is_symlink()
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in out0.iterdir())


@pytest.mark.parametrize("trick", ["once-short", "once-shortnext", "once-long", "once-reset"])
def test_an_answer_out_of_step_hands_the_rest_back_and_every_file_arrives(home, tmp_path, cli, trick):
    """A body shorter than its length then a close, one shorter followed by the next answer (whose
    head's first bytes complete it), a body longer than its length, a reset, in the middle of a
    pipelined batch, and no hash to catch a wrong body: the lane stops, the usual path fetches
    what it handed back; every file byte-exact, exit 0."""
    proc, out, files, errors, (ahead, lane_asked, tricked) = _run(cli, tmp_path, trick, {"f070.bin": trick},
                                                                  bulk=True, hashes=False)
    assert ahead > 10 and tricked["f070.bin"], "the lane pipelined the list's requests and met the trick"
    assert proc.returncode == 0, proc.stderr
    _check(out, files, skip=set())
    assert not [p for p in out.iterdir() if p.name not in files]


def test_a_503_in_a_batch_lowers_the_hosts_cap_and_ends_the_lane(home, tmp_path, cli):
    """A 503 among the pipelined answers is reported to the host (its cap comes down, said in the
    output, as for the usual path's refused requests) and ends the lane; the other files arrive."""
    proc, out, files, errors, (ahead, lane_asked, tricked) = _run(cli, tmp_path, "503", {"f070.bin": "503"},
                                                                  bulk=True, hashes=False, output="--plain")
    assert tricked["f070.bin"], "the lane met the 503"
    assert proc.returncode == 3 and any("f070.bin" in e for e in errors), proc.stderr
    assert "connection to it from now on" in proc.stdout + proc.stderr, proc.stderr[-2000:]
    _check(out, files, skip={"f070.bin"})
