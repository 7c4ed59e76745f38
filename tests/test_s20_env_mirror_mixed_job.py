"""A background job of dataset names and ``hf://`` repos from a shell that sets
``PREFETCH_DATASET_MIRROR`` (no ``--mirror`` typed): the foreground line works, but ``-b`` was
refused (exit 2, "with hf names, --mirror is read by that kind alone"), because the job pinned
the environment's dataset mirror as if ``--mirror`` had been typed; and a pinned mirror is what
the hub's planner takes for its endpoint. The job now leaves the variable to the datasets, as
the foreground run does."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.test_hf import MODEL_FILES, hf_env, hub  # noqa: F401 (fixtures)
from tests.test_jobs import job_id_from, stop_leftover_workers, synth  # noqa: F401 (fixtures)


def test_a_mixed_job_with_the_environments_dataset_mirror_starts_and_takes_it(hf_env, hub, synth, origin, home,
                                                                               tmp_path):
    registry, data = synth
    origin.put("mirror/synth.bin", data)
    env = dict(hf_env, PREFETCH_DATASET_MIRROR=origin.url_for("mirror/"))
    started = run_cli("get", "synth", "hf://acme/tiny", "--registry", str(registry), "-b", env=env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    waited = run_cli("wait", job, env=env, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr
    keras = home / ".keras" if (home / ".keras").exists() else None
    placed = list(home.rglob("synth.bin"))
    assert [p.read_bytes() for p in placed] == [data], (keras, placed)
    assert any("/mirror/synth.bin" in r.path for r in origin.requests if r.method == "GET"), \
        "the dataset came from the environment's mirror"
    assert (home / "hf" / "hub" / "models--acme--tiny" / "refs" / "main").is_file(), "the repo from the job's hub"
