"""A small /tmp and a HOME on a small disk, the data dir elsewhere (AutoDL's system disk, PAI's
/root), tried without mounting anything: HOME and TMPDIR are regular files, where nothing can
be made, and every cache variable points at the data dir. A URL, an archive with --extract, a
``-b`` job and a Hugging Face model all land, complete and verified, under the data dir: no big
file is staged in /tmp or HOME (tests/test_disk.py fills real tmpfs mounts).
"""

from __future__ import annotations

import hashlib
import os
import random

from tests.archives import tar_gz
from tests.conftest import run_cli
from tests.test_hf import MODEL_FILES, assert_offline_loads, hf_env, hub  # noqa: F401
from tests.test_jobs import job_id_from

DATA = random.Random(1417).randbytes(3_000_000)
SHA = hashlib.sha256(DATA).hexdigest()


def test_nothing_is_staged_in_tmp_or_home(hf_env, hub, origin, tmp_path):  # noqa: F811
    data = tmp_path / "autodl-tmp"
    data.mkdir()
    small = tmp_path / "small"
    small.write_text("a file: nothing can be made under it\n")
    archive = tar_gz({"imgs/a.bin": DATA, "imgs/b.txt": b"b\n"})
    origin.put("d.bin", DATA)
    origin.put("imgs.tar.gz", archive)
    env = dict(hf_env, HOME=str(small), TMPDIR=str(small), XDG_CACHE_HOME=str(small), XDG_STATE_HOME=str(small),
               XDG_CONFIG_HOME=str(small), PREFETCH_HOME=str(data / "state"), KERAS_HOME=str(data / "keras"),
               HF_HOME=str(data / "hf"), TORCH_HOME=str(data / "torch"), MODELSCOPE_CACHE=str(data / "ms"))

    done = run_cli("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(data / "fg"), env=env, cwd=data)
    assert done.returncode == 0, done.stderr
    done = run_cli("get", origin.url_for("imgs.tar.gz"), "--sha256", hashlib.sha256(archive).hexdigest(),
                   "--extract", "-P", str(data / "ar"), env=env, cwd=data)
    assert done.returncode == 0, done.stderr
    started = run_cli("get", origin.url_for("d.bin"), "--sha256", SHA, "-o", str(data / "bg.bin"), "-b", env=env,
                      cwd=data)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", job_id_from(started.stdout), "--timeout", "60", env=env, cwd=data)
    assert waited.returncode == 0, waited.stderr
    done = run_cli("get", "hf://acme/tiny", env=env, cwd=data)
    assert done.returncode == 0, done.stderr

    assert (data / "fg" / "d.bin").read_bytes() == DATA and (data / "bg.bin").read_bytes() == DATA
    assert (data / "ar" / "imgs" / "a.bin").read_bytes() == DATA
    assert_offline_loads(env, "acme/tiny", MODEL_FILES)
    assert small.read_text() == "a file: nothing can be made under it\n"
    assert not [p for p in data.rglob("*") if p.name.endswith((".part", ".incomplete"))]
    assert os.path.isfile(small)
