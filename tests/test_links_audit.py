"""Planted links in the Hugging Face cache, ModelScope's cache and `prefetch push` (issue 21, item 6).

A hub cache in a shared place (``HF_HUB_CACHE=/tmp/hf``, a team's group cache) is writable by
others: a second user (uid 65534, a real one, from a forked child that drops root) plants
symbolic links at the names prefetch writes (``.locks/``, ``refs/``, ``snapshots/<commit>``,
``blobs/<etag>``, a repo folder) or at the cache file ``push`` reads. prefetch must refuse with one
line and exit 5, and the link's target must be left exactly as it was.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from tests.test_hf import MODEL_FILES, blob_name, hf_env, hub  # noqa: F401 - fixtures
from tests.test_modelscope import MODEL as MS_MODEL, ms, ms_env  # noqa: F401 - fixtures
from tests.test_shared_cache import VICTIM_BYTES, as_other_user, plant_dirs, shared, victim  # noqa: F401

OTHER = 65534


@pytest.fixture
def victim_dir(tmp_path) -> Path:
    """A folder of ours that a planted folder link points at: it must stay empty."""
    path = tmp_path / "victim-dir"
    path.mkdir()
    os.chmod(path, 0o777)  # even a folder anyone may write must not be written by prefetch through a link
    return path


@pytest.fixture
def shared_hub(shared, hf_env, monkeypatch) -> Path:
    """HF_HUB_CACHE in the sticky shared folder."""
    monkeypatch.setenv("HF_HUB_CACHE", str(shared / "hub"))
    plant_dirs(shared / "hub")
    return shared / "hub"


def plant_link(target: Path, link: Path, *, dirs: tuple[Path, ...] = ()) -> None:
    """As the other user: make ``dirs`` (world-writable), then ``link -> target``."""
    def make():
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o777)
        os.symlink(target, link)
    as_other_user(make)


def refused(proc, path: Path | str) -> None:
    """Exit 5, one error line: the refusal naming ``path`` (for an hf:// repo, in its summary), no traceback."""
    assert proc.returncode == ExitCode.FILESYSTEM, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1 and f"refusing to use {path}:" in errors[0], proc.stderr


def assert_untouched(victim: Path | None = None, victim_dir: Path | None = None) -> None:
    if victim is not None:
        assert victim.read_bytes() == VICTIM_BYTES and victim.stat().st_mode & 0o777 == 0o644
    if victim_dir is not None:
        assert list(victim_dir.iterdir()) == [], list(victim_dir.rglob("*"))


def tiny(hub) -> tuple[str, str]:
    """(repo folder name, commit) of hf://acme/tiny."""
    return "models--acme--tiny", hub.repos[("model", "acme/tiny")].commit


# --------------------------------------------------------------------------- Hugging Face cache


def test_hf_locks_folder_planted_as_a_link_is_not_followed(cli, hub, shared_hub, victim_dir):
    plant_link(victim_dir, shared_hub / ".locks")
    proc = cli("get", "hf://acme/tiny")
    refused(proc, shared_hub / ".locks")
    assert_untouched(victim_dir=victim_dir)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_hf_lock_file_planted_as_a_link_or_fifo_is_refused(cli, hub, shared_hub, victim, kind):
    """Older filelock releases open the lock O_TRUNC (and chmod it): through a link, the victim's bytes would go."""
    folder, _ = tiny(hub)
    etag = blob_name(MODEL_FILES["config.json"], lfs=False)
    lock = shared_hub / ".locks" / folder / f"{etag}.lock"
    if kind == "symlink":
        plant_link(victim, lock, dirs=(shared_hub / ".locks", lock.parent))
    else:
        def make():
            for d in (shared_hub / ".locks", lock.parent):
                d.mkdir(exist_ok=True)
                os.chmod(d, 0o777)
            os.mkfifo(lock)
        as_other_user(make)
    proc = cli("get", "hf://acme/tiny")
    refused(proc, lock)
    assert_untouched(victim)
    assert os.path.islink(lock) if kind == "symlink" else stat.S_ISFIFO(os.lstat(lock).st_mode)  # left as it was


@pytest.mark.parametrize("suffix", [".part", ".part.json"])
def test_hf_partial_planted_as_a_link_is_refused(cli, hub, shared_hub, victim, suffix):
    """The engine's O_NOFOLLOW opens hold in the hub cache's blobs/ too (a regression guard)."""
    folder, _ = tiny(hub)
    repo = shared_hub / folder
    partial = repo / "blobs" / (blob_name(MODEL_FILES["config.json"], lfs=False) + suffix)
    plant_link(victim, partial, dirs=(repo, repo / "blobs"))
    proc = cli("get", "hf://acme/tiny")
    refused(proc, partial)
    assert_untouched(victim)


def test_hf_snapshot_folder_planted_as_a_link_is_not_followed(cli, hub, shared_hub, victim_dir):
    folder, commit = tiny(hub)
    repo = shared_hub / folder
    plant_link(victim_dir, repo / "snapshots" / commit, dirs=(repo, repo / "snapshots"))
    proc = cli("get", "hf://acme/tiny")
    refused(proc, repo / "snapshots" / commit)
    assert_untouched(victim_dir=victim_dir)  # no nested/, empty/ made through the link
    assert not (repo / "refs" / "main").exists()  # the ref is written only for a complete snapshot


def test_hf_repo_folder_planted_as_a_link_is_not_followed(cli, hub, shared_hub, victim_dir):
    folder, _ = tiny(hub)
    plant_link(victim_dir, shared_hub / folder)
    proc = cli("get", "hf://acme/tiny")
    refused(proc, shared_hub / folder)
    assert_untouched(victim_dir=victim_dir)


def test_hf_refs_folder_planted_as_a_link_is_not_written_through(cli, hub, shared_hub, victim_dir):
    folder, _ = tiny(hub)
    repo = shared_hub / folder
    plant_link(victim_dir, repo / "refs", dirs=(repo,))
    proc = cli("get", "hf://acme/tiny")
    refused(proc, repo / "refs")
    assert_untouched(victim_dir=victim_dir)  # no refs/main written into the victim's folder


def test_hf_ref_planted_as_a_link_is_refused_and_left(cli, hub, shared_hub, victim):
    folder, _ = tiny(hub)
    repo = shared_hub / folder
    plant_link(victim, repo / "refs" / "main", dirs=(repo, repo / "refs"))
    proc = cli("get", "hf://acme/tiny")
    refused(proc, repo / "refs" / "main")
    assert_untouched(victim)
    assert os.readlink(repo / "refs" / "main") == str(victim)


def test_hf_blob_planted_as_a_link_is_neither_trusted_nor_replaced(cli, hub, shared_hub, tmp_path):
    """A link at ``blobs/<etag>`` to a file of the right size (the planter's own bytes) is not "cached"."""
    folder, commit = tiny(hub)
    repo = shared_hub / folder
    data = MODEL_FILES["config.json"]
    fake = shared_hub / "fake-config.json"
    etag = blob_name(data, lfs=False)

    def plant():
        fake.write_bytes(b"X" * len(data))  # same size, other bytes
        for d in (repo, repo / "blobs"):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o777)
        os.symlink(fake, repo / "blobs" / etag)
    as_other_user(plant)

    proc = cli("get", "hf://acme/tiny")
    refused(proc, repo / "blobs" / etag)
    assert fake.read_bytes() == b"X" * len(data)
    assert not os.path.lexists(repo / "snapshots" / commit / "config.json")  # never pointed at the planted bytes


def test_hf_snapshot_entry_planted_by_another_user_is_refused(cli, hub, shared_hub, victim):
    folder, commit = tiny(hub)
    snap = shared_hub / folder / "snapshots" / commit
    plant_link(victim, snap / "config.json", dirs=(shared_hub / folder, snap.parent, snap))
    proc = cli("get", "hf://acme/tiny")
    refused(proc, snap / "config.json")
    assert_untouched(victim)
    assert os.readlink(snap / "config.json") == str(victim)


def test_hf_own_stale_snapshot_link_is_replaced(cli, hub, hf_env, home):
    """Our own link of that name (a stale one) is ours to replace: the rule refuses only others' entries."""
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 0, done.stderr
    folder, commit = tiny(hub)
    pointer = home / "hf" / "hub" / folder / "snapshots" / commit / "config.json"
    target = os.readlink(pointer)
    pointer.unlink()
    os.symlink("../../blobs/gone", pointer)
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 0, done.stderr
    assert os.readlink(pointer) == target and pointer.read_bytes() == MODEL_FILES["config.json"]


# --------------------------------------------------------------------------- ModelScope cache


def test_ms_repo_folder_planted_as_a_link_is_not_followed(cli, ms, ms_env, shared, victim_dir, monkeypatch):
    monkeypatch.setenv("MODELSCOPE_CACHE", str(shared / "ms"))
    plant_link(victim_dir, shared / "ms" / "models" / "acme--tiny", dirs=(shared / "ms", shared / "ms" / "models"))
    proc = cli("get", "ms://acme/tiny")
    refused(proc, shared / "ms" / "models" / "acme--tiny")
    assert_untouched(victim_dir=victim_dir)  # no snapshots/ made through the link


# --------------------------------------------------------------------------- push


def test_push_never_reads_a_cache_file_through_a_planted_link(s3, cli, shared, tmp_path, monkeypatch):
    """fashion-mnist style: no hash. A link planted at the cached name would push its target to the store."""
    from tests.test_store import assert_store_consistent

    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"root's private key\n")
    reg = tmp_path / "r.toml"
    reg.write_text('[toy]\n[[toy.files]]\nname = "notes.bin"\nurl = "http://127.0.0.1:9/notes.bin"\n')
    monkeypatch.setenv("KERAS_HOME", str(shared))
    plant_link(secret, shared / "datasets" / "notes.bin", dirs=(shared / "datasets",))

    proc = cli("push", "toy", "--registry", str(reg), s3.prefix)
    refused(proc, shared / "datasets" / "notes.bin")
    assert assert_store_consistent(s3, s3.prefix) == {}

    # A file the user names on the command line is theirs to push, through their own link too.
    mine = tmp_path / "mine.bin"
    mine.write_bytes(b"mine\n")
    os.symlink(mine, tmp_path / "mine-link.bin")
    proc = cli("push", str(tmp_path / "mine-link.bin"), s3.prefix)
    assert proc.returncode == 0, proc.stderr
    assert assert_store_consistent(s3, s3.prefix) == {"mine-link.bin": b"mine\n"}


# --------------------------------------------------------------------------- export


def test_export_never_creates_its_folder_through_a_link_planted_above_it(cli, home, origin, shared, victim_dir,
                                                                         tmp_path):
    from tests.test_shared_export import cached

    registry = cached(cli, origin, tmp_path)
    plant_link(victim_dir, shared / "team")  # the team's folder, as another user made it: a link
    out = shared / "team" / "www"
    proc = cli("export", str(out), "toy", "--registry", registry)
    refused(proc, shared / "team")
    assert_untouched(victim_dir=victim_dir)  # no www/, no data file, no SHA256SUMS through the link


# --------------------------------------------------------------------------- hard links


def test_a_hard_link_planted_at_the_partial_to_a_file_of_ours_is_refused(cli, origin, shared):
    """Linux lets a user hard-link a file they may write (fs.protected_hardlinks): our own 0666
    file, linked at ``<final>.part``, passes the owner check; writing there would overwrite it."""
    from tests.test_shared_cache import DATA, get_url

    origin.put("d.bin", DATA)
    ours = shared / "notes.txt"
    ours.write_bytes(VICTIM_BYTES)
    os.chmod(ours, 0o666)
    out = shared / "d.bin"
    as_other_user(lambda: os.link(ours, f"{out}.part"))

    proc = get_url(cli, origin, out)
    refused(proc, f"{out}.part")
    assert "hard link" in proc.stderr
    assert ours.read_bytes() == VICTIM_BYTES and ours.stat().st_size == len(VICTIM_BYTES)
    assert not out.exists()


# --------------------------------------------------------------------------- another user's blobs


@pytest.mark.parametrize("honest", [False, True])
def test_another_users_blob_is_used_only_when_its_bytes_match_its_name(cli, hub, shared_hub, honest):
    """A file at ``blobs/<etag>`` is what huggingface_hub loads: another user's is hashed before it is trusted."""
    folder, commit = tiny(hub)
    repo = shared_hub / folder
    data = MODEL_FILES["model.safetensors"]
    etag = blob_name(data, lfs=True)

    def plant():
        for d in (repo, repo / "blobs"):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o777)
        (repo / "blobs" / etag).write_bytes(data if honest else b"\0" * len(data))  # same size either way
    as_other_user(plant)

    proc = cli("get", "hf://acme/tiny")
    pointer = repo / "snapshots" / commit / "model.safetensors"
    if honest:  # a teammate's verified blob: reused, not downloaded again
        assert proc.returncode == 0, proc.stderr
        assert pointer.read_bytes() == data
        assert not [r for r in hub.cdn.requests if r.method == "GET"], "downloaded again"
    else:  # zeros under the weights' name: never linked into the snapshot
        refused(proc, repo / "blobs" / etag)
        assert not os.path.lexists(pointer)
    assert os.stat(repo / "blobs" / etag).st_uid == OTHER  # theirs, left as it was


def test_rm_of_a_revision_never_follows_a_ref_that_names_a_path(cli, hub, shared_hub):
    """``refs/v2`` is a commit hash; one planted as ``../../precious`` must not turn ``rm`` on that folder."""
    folder, _ = tiny(hub)
    repo = shared_hub / folder
    precious = shared_hub / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_bytes(VICTIM_BYTES)

    def plant():
        for d in (repo, repo / "refs", repo / "snapshots"):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o777)
        (repo / "refs" / "v2").write_text("../../precious")
    as_other_user(plant)

    proc = cli("rm", "hf://acme/tiny@v2")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (precious / "thesis.tex").read_bytes() == VICTIM_BYTES, proc.stdout + proc.stderr
