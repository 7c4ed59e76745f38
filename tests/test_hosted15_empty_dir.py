"""``prefetch get -P newdir URL`` that fails before any byte (a 404, a name that does not
resolve) used to leave the empty ``newdir`` it created (and every level of ``-P a/b/c``). A
folder the run created and left empty now goes; one that was there before stays, so does one
with anything in it (a ``.part`` to resume from), and a link is never followed.
"""

from __future__ import annotations

import os

from prefetch.errors import ExitCode
from prefetch.fs.made_dirs import hold_dir, remove_made_dirs
from prefetch.fs.safefs import make_dirs
from tests.conftest import run_cli
from tests.test_jobs import job_id_from

DATA = b"d" * 5000


def _errors(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error: ")]


def test_a_404_into_new_folders_leaves_none_of_them(cli, origin, tmp_path):
    got = cli("get", origin.url_for("missing.bin"), "-P", str(tmp_path / "new" / "sub" / "deeper"))
    assert got.returncode == ExitCode.NETWORK and len(_errors(got)) == 1, got.stderr
    assert not (tmp_path / "new").exists(), list((tmp_path / "new").rglob("*"))


def test_a_folder_that_was_there_stays_and_only_the_new_level_goes(cli, origin, tmp_path):
    there = tmp_path / "there"
    there.mkdir()
    assert cli("get", origin.url_for("missing.bin"), "-P", str(there)).returncode == ExitCode.NETWORK
    assert there.is_dir() and os.listdir(there) == []
    assert cli("get", origin.url_for("missing.bin"), "-o", str(there / "new" / "x.bin")).returncode == ExitCode.NETWORK
    assert there.is_dir() and os.listdir(there) == []


def test_a_list_with_one_file_placed_keeps_its_folder(cli, origin, tmp_path):
    origin.put("good.bin", DATA)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{origin.url_for('good.bin')}\n{origin.url_for('missing.bin')}\n")
    got = cli("get", "-i", str(listing), "-P", str(tmp_path / "out"))
    assert got.returncode == ExitCode.NETWORK, got.stderr
    assert os.listdir(tmp_path / "out") == ["good.bin"]


def test_a_name_that_does_not_resolve_from_a_job_leaves_no_folder(home, tmp_path):
    env = dict(os.environ, PREFETCH_RESOLVE="*=fail")
    started = run_cli("get", "http://files.example.org/a.bin", "-P", str(tmp_path / "data"), "-b", env=env)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60", env=env)
    assert waited.returncode == ExitCode.NETWORK, waited.stderr
    assert not (tmp_path / "data").exists()


def test_a_folder_with_a_part_to_resume_from_stays(cli, origin, tmp_path):
    """The first bytes arrived, then the server went away: the ``.part`` and its folder stay."""
    from tests.origin import CloseAfter

    origin.put("big.bin", DATA * 200)
    origin.add_fault(CloseAfter(20_000, path="big.bin"))
    out = tmp_path / "partial"
    got = cli("get", origin.url_for("big.bin"), "-P", str(out), "--retries", "0", "--connections", "1")
    assert got.returncode == ExitCode.NETWORK, got.stderr
    assert "big.bin.part" in os.listdir(out), os.listdir(out)


def test_a_link_in_a_made_level_is_never_followed(tmp_path):
    """A made level replaced by a link (to an empty folder) during the run: neither the link
    nor its target is removed, nor any level above that is not empty."""
    made: list = []
    make_dirs(tmp_path / "a" / "b" / "c", made=made)
    assert made == [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "a" / "b" / "c").rmdir()
    (tmp_path / "a" / "b").rmdir()
    (tmp_path / "a" / "b").symlink_to(target)
    assert remove_made_dirs(made) == []
    assert (tmp_path / "a" / "b").is_symlink() and target.is_dir()

    made = []
    make_dirs(tmp_path / "p" / "q", made=made)
    (tmp_path / "p" / "q" / "kept.txt").write_text("x")
    assert remove_made_dirs(made) == [] and (tmp_path / "p" / "q" / "kept.txt").exists()
    (tmp_path / "p" / "q" / "kept.txt").unlink()
    assert remove_made_dirs(made) == [tmp_path / "p" / "q", tmp_path / "p"]


def test_a_folder_another_run_holds_is_left(tmp_path):
    """Another run found the new folder there and writes into it soon: it holds it, so this
    run's end leaves it (two -b jobs into one new -P, the first failing at once)."""
    made: list = []
    make_dirs(tmp_path / "shared" / "data", made=made)
    other = hold_dir(tmp_path / "shared" / "data")
    assert other is not None
    try:
        assert remove_made_dirs(made) == [] and (tmp_path / "shared" / "data").is_dir()
    finally:
        os.close(other)
    assert remove_made_dirs(made) == [tmp_path / "shared" / "data", tmp_path / "shared"]
