"""``--content-disposition``: a server that names its file ``big.bin.part.lock`` beside a
``big.bin`` of the same command. The served-name checks kept a name that is another file's
``.part`` or ``.part.json`` (fourteenth sitting), but not its ``.part.lock``, the lock beside
the file the fifteenth sitting added: the served file was downloaded "again" over the lock
``big.bin``'s run held ("has no record of a completed prefetch download ... downloading
again"), and replaced it while that run went on, so a run of another home or user found the
served file at the lock's name and no longer waited for ``big.bin``'s (the two then wrote one
``.part``), and the folder kept the served bytes under the lock's name. Now that name keeps the
URL's, with one note, as a ``.part`` name does. A real nginx serves the header."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer

BIG = bytes(range(256)) * 4096  # 1 MiB
LK = b"the server's file\n"


@pytest.fixture
def nginx(tmp_path):
    root = tmp_path / "www"
    (root / "f").mkdir(parents=True)
    (root / "big.bin").write_bytes(BIG)
    (root / "f" / "lk").write_bytes(LK)
    location = "location = /f/lk { add_header Content-Disposition 'attachment; filename=\"big.bin.part.lock\"'; }"
    with NginxServer(root, location=location) as server:
        yield server


def test_a_served_name_that_is_another_files_lock_keeps_the_urls(nginx, home, tmp_path):
    out = tmp_path / "out"
    got = run_cli("get", nginx.url_for("big.bin"), nginx.url_for("f/lk"), "--content-disposition", "-P", str(out),
                  cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (out / "big.bin").read_bytes() == BIG
    assert (out / "lk").read_bytes() == LK
    assert sorted(p.name for p in out.iterdir()) == ["big.bin", "lk"]  # (no served bytes at big.bin's lock)
    assert "saved as big.bin.part.lock" not in got.stderr, got.stderr
    assert "big.bin.part.lock" in got.stderr and "Traceback" not in got.stderr  # (the note says why)
