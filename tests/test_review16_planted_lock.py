"""A link (or FIFO) planted at a file's ``<final>.part.lock`` (the lock beside the file, fifteenth
sitting) stopped ``prefetch rm`` and ``prefetch clean`` whole: "refusing to use
.../mnist.npz.part.lock: it is a symbolic link", exit 5, with the rest of the names or
partials left where they were (clean had removed some and stopped in the middle). In a shared
folder (``/tmp``-like) another user can plant one: nobody could tidy the cache any more. A
download still refuses such a name (it never writes through a link); ``rm`` and ``clean`` now
take it as no lock (no run holds a lock at such a name: each refuses it), never follow it nor
remove it, and go on. Real CLI processes; the link points where nothing must appear."""

from __future__ import annotations

import os
import time

from tests.conftest import run_cli


def test_clean_goes_on_past_a_planted_lock_link(home, keras_datasets, tmp_path):
    keras_datasets.mkdir(parents=True)
    victim = tmp_path / "victim"
    old = time.time() - 10 * 86400
    for name in ("a.bin", "b.bin"):
        (keras_datasets / f"{name}.part").write_bytes(b"x" * 1000)
        os.utime(keras_datasets / f"{name}.part", (old, old))
    (keras_datasets / "a.bin.part.lock").symlink_to(victim)
    os.mkfifo(keras_datasets / "b.bin.part.lock")

    got = run_cli("clean", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert not (keras_datasets / "a.bin.part").exists() and not (keras_datasets / "b.bin.part").exists()
    assert os.path.islink(keras_datasets / "a.bin.part.lock") and not os.path.lexists(victim)  # never followed
    assert "Traceback" not in got.stderr


def test_rm_goes_on_past_a_planted_lock_link(home, keras_datasets, tmp_path):
    keras_datasets.mkdir(parents=True)
    victim = tmp_path / "victim"
    (keras_datasets / "mnist.npz").write_bytes(b"not really mnist")
    (keras_datasets / "mnist.npz.part.lock").symlink_to(victim)

    got = run_cli("rm", "mnist", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert not os.path.lexists(keras_datasets / "mnist.npz")
    assert os.path.islink(keras_datasets / "mnist.npz.part.lock") and not os.path.lexists(victim)

    offline = {**os.environ, "PREFETCH_RESOLVE": "*=fail"}  # (nothing beyond loopback, whatever happens)
    refused = run_cli("get", "mnist", cwd=tmp_path, env=offline)  # (a download still refuses it: exit 5, one line)
    assert refused.returncode == 5 and "symbolic link" in refused.stderr and not os.path.lexists(victim)
