"""``prefetch export DIR`` into a shared directory, with links planted by a real second user
(uid 65534; issue 21, item 6: the export path audited for planted links)."""

from __future__ import annotations

import hashlib
import os
import random

from tests.helpers import write_registry
from tests.test_shared_cache import VICTIM_BYTES, as_other_user, shared, victim  # noqa: F401 - fixtures

DATA = random.Random(71).randbytes(50_000)
SHA = hashlib.sha256(DATA).hexdigest()


def cached(cli, origin, tmp_path) -> str:
    origin.put("d.bin", DATA)
    registry = write_registry(tmp_path / "r.toml", "toy", origin.url_for("d.bin"), sha256=SHA)
    assert cli("get", "toy", "--registry", str(registry), "-q").returncode == 0
    return str(registry)


def errors_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def test_links_planted_in_the_export_dir_are_refused_never_written_through(cli, home, origin, shared, victim,
                                                                          tmp_path):
    registry = cached(cli, origin, tmp_path)
    for name in ("d.bin", "SHA256SUMS"):
        out = shared / f"www-{name}"

        def plant(out=out, name=name):
            out.mkdir()
            os.chmod(out, 0o1777)
            os.symlink(victim, out / name)
        as_other_user(plant)

        proc = cli("export", str(out), "toy", "--registry", registry)

        assert proc.returncode == 5, proc.stderr
        (error,) = errors_of(proc.stderr)
        assert "refusing to use" in error and name in error, error
        assert victim.read_bytes() == VICTIM_BYTES
        assert (out / name).is_symlink()  # left as it was


def test_a_file_planted_with_a_matching_sha256sums_is_not_kept_as_ours(cli, home, origin, shared, tmp_path):
    """Another user's file of the right size, listed in a SHA256SUMS of theirs, is never reported as exported."""
    registry = cached(cli, origin, tmp_path)
    out = shared / "www"

    def plant():
        out.mkdir()
        os.chmod(out, 0o1777)
        (out / "d.bin").write_bytes(bytes(len(DATA)))  # same size, other bytes
        (out / "SHA256SUMS").write_text(f"{SHA}  d.bin\n")
    as_other_user(plant)

    proc = cli("export", str(out), "toy", "--registry", registry, "--json")

    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "belongs to another user" in proc.stderr or "refusing" in proc.stderr
    assert (out / "d.bin").read_bytes() == bytes(len(DATA))
