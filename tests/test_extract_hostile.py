"""A hostile review of safe extraction through `prefetch get`: member names, corrupt archives,
races and kills. The classic escapes are tests/test_archives_cli.py's and tests/test_extract.py's."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile

from tests.helpers import write_registry
from tests.test_archives_cli import file_member, tar_bytes, world  # noqa: F401 - the fixture


def get_bytes(tmp_path, origin, name: str, archive: bytes, *args: str, sha: bool = True):
    """``prefetch get`` of a one-archive dataset, its output as bytes (member names need not be UTF-8)."""
    origin.put(name, archive)
    reg = write_registry(tmp_path / "registry.toml", "evil", origin.url_for(name),
                         sha256=hashlib.sha256(archive).hexdigest() if sha else None, extract=["somedir"])
    return subprocess.run([sys.executable, "-m", "prefetch", "get", "evil", "--registry", str(reg), *args],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=120)


def test_a_newline_in_a_member_name_cannot_add_a_line_to_the_output(home, world, tmp_path):
    origin, _ = world
    forged = "a\ndownloaded evil.npz"
    archive = tar_bytes([file_member("ok.txt"), (tarfile.TarInfo(forged), b"x"),
                         (tarfile.TarInfo("tab\there"), b"y")])

    proc = get_bytes(tmp_path, origin, "names.tar.gz", archive)

    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    somedir = home / ".keras" / "datasets" / "somedir"
    assert lines[1:] == [f"extracted  {somedir}/a\\ndownloaded evil.npz", f"extracted  {somedir}/ok.txt",
                         f"extracted  {somedir}/tab\\there"], lines
    assert (somedir / forged).read_bytes() == b"x"  # the file itself keeps its real name
