"""SIGKILL a background worker mid-body, during verify and during extract; then resume.

After each kill `status` must say "interrupted", and `prefetch resume JOB` must give
verified files identical to the origin's, with no temp files or dirs left behind.
"""

from __future__ import annotations

import hashlib
import os
import signal
from pathlib import Path

import pytest

from tests.archives import tar_gz
from tests.test_jobs import (
    job_id_from,
    leftovers,
    poll,
    record,
    sha256_of,
    status_json,
    stop_leftover_workers,  # noqa: F401 - autouse fixture
    synthetic,
    write_registry,
)

MEMBERS = 1500  # enough that extracting takes a visible while
WAIT = 180  # (a hang guard: on a CI machine at load 16 a worker's extraction of 1,500 members took 30 s+)


@pytest.fixture(autouse=True)
def _worker_at_normal_priority(monkeypatch):
    """These tests are about kills and resumes, not politeness (tests/test_jobs_priority.py): a
    worker at nice 19 and the idle I/O class on a loaded machine reached its pause after the
    30 s the polls allowed (the CI of 2026-11-28, load 16)."""
    monkeypatch.setenv("PREFETCH_NICE", "0")


def make_archive() -> tuple[bytes, dict[str, bytes]]:
    """A tar.gz with many small members under ``arch/``; returns (archive, {member: bytes})."""
    members = {f"arch/d{i % 30}/f{i}.txt": (f"member {i}\n" * 16).encode() for i in range(MEMBERS)}
    return tar_gz(members), members


@pytest.fixture
def datasets(home, origin, tmp_path):
    data = synthetic(1_500_000, seed=7)
    archive, members = make_archive()
    registry = write_registry(
        tmp_path / "registry.toml",
        origin,
        {
            "synth": [{"name": "synth.bin", "data": data}],
            # Like cifar10: extracted into datasets/ itself and into a "-target" dir.
            "archset": [{"name": "arch.tar.gz", "data": archive, "extract": [".", "arch-target"]}],
        },
    )
    return registry, data, archive, members


def start_paused(cli, monkeypatch, registry: Path, dataset: str, at: str) -> str:
    """Start a job whose worker pauses at event ``at`` (``KIND[:N]``, the worker's test hook); its id."""
    monkeypatch.setenv("PREFETCH_TEST_PAUSE_AT", at)
    job_id = job_id_from(cli("get", dataset, "--registry", str(registry), "-b").stdout)
    log = Path(record(job_id).log)
    kind = at.partition(":")[0]
    poll(lambda: f"test hook: pausing at {kind}" in log.read_text(), timeout=WAIT, what=f"the pause at {at}")
    return job_id


def kill_worker(job_id: str) -> None:
    pid = record(job_id).pid
    assert pid
    os.kill(pid, signal.SIGKILL)
    poll(lambda: record(job_id).state == "interrupted", timeout=WAIT, what="the job to show as interrupted")


def assert_interrupted(cli, job_id: str) -> None:
    table = cli("status", job_id)
    assert table.returncode == 0
    assert "interrupted" in table.stdout
    assert f"prefetch resume {job_id}" in table.stdout
    (job,) = status_json(cli, job_id)["jobs"]
    assert job["state"] == "interrupted" and job["exit_code"] == 7
    assert cli("wait", job_id).returncode == 7


def resume_and_wait(cli, job_id: str, env: dict | None = None) -> None:
    resumed = cli("resume", job_id, env=env) if env is not None else cli("resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    result = cli("wait", job_id, timeout=60)
    assert result.returncode == 0, result.stderr
    rec = record(job_id)
    assert rec.state == "done" and rec.attempts == 2


def no_hook_env() -> dict:
    env = os.environ.copy()
    env.pop("PREFETCH_TEST_PAUSE_AT", None)
    return env


def assert_archive_in_place(root: Path, archive: bytes, members: dict[str, bytes]) -> None:
    datasets = root / ".keras" / "datasets"
    assert sha256_of(datasets / "arch.tar.gz") == hashlib.sha256(archive).hexdigest()
    for base in (datasets, datasets / "arch-target"):
        found = {p.relative_to(base).as_posix() for p in (base / "arch").rglob("*") if p.is_file()}
        assert found == set(members)
        for name in ("arch/d0/f0.txt", f"arch/d29/f{MEMBERS - 1}.txt"):
            assert (base / name).read_bytes() == members[name]


def test_kill_mid_body_then_resume(datasets, origin, home, cli):
    registry, data, _, _ = datasets
    origin.rate = 200_000  # per connection
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "2", "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes >= 300_000, what="a third of the body")
    kill_worker(job_id)
    assert_interrupted(cli, job_id)
    part = home / ".keras" / "datasets" / "synth.bin.part"
    assert part.exists() and not (home / ".keras" / "datasets" / "synth.bin").exists()
    sent_before = origin.bytes_sent

    origin.rate = None
    resume_and_wait(cli, job_id)
    target = home / ".keras" / "datasets" / "synth.bin"
    assert sha256_of(target) == hashlib.sha256(data).hexdigest()
    # Resumed from the bytes on disk: the second attempt did not fetch the whole file again.
    assert origin.bytes_sent - sent_before < len(data)
    assert not leftovers(home)


def test_kill_during_verify_then_resume(datasets, origin, home, cli, monkeypatch):
    registry, data, _, _ = datasets
    job_id = start_paused(cli, monkeypatch, registry, "synth", "verify")
    assert record(job_id).files[0].state == "verified"
    kill_worker(job_id)
    assert_interrupted(cli, job_id)
    assert not (home / ".keras" / "datasets" / "synth.bin").exists()  # never placed unverified
    sent_before = origin.bytes_sent

    resume_and_wait(cli, job_id, env=no_hook_env())
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()
    assert origin.bytes_sent == sent_before  # the complete .part was verified again, not fetched
    assert not leftovers(home)


def test_kill_between_two_extractions_then_resume(datasets, origin, home, cli, monkeypatch):
    registry, _, archive, members = datasets
    job_id = start_paused(cli, monkeypatch, registry, "archset", "extract:2")  # first dir extracted, second not yet
    assert record(job_id).files[0].state == "extracting"
    kill_worker(job_id)
    assert_interrupted(cli, job_id)
    # Keras takes the archive's presence as "done": it must not be there yet.
    assert not (home / ".keras" / "datasets" / "arch.tar.gz").exists()

    resume_and_wait(cli, job_id, env=no_hook_env())
    assert_archive_in_place(home, archive, members)
    assert not leftovers(home)


def test_kill_mid_extraction_leaves_nothing_behind_after_resume(datasets, origin, home, cli):
    registry, _, archive, members = datasets
    job_id = job_id_from(cli("get", "archset", "--registry", str(registry), "-b").stdout)
    keras_root = home / ".keras"

    def temp_dirs() -> list[Path]:
        return [p for p in keras_root.rglob(".*") if ".extract-" in p.name]

    # Kill while a half-written extraction dir exists beside its target.
    poll(temp_dirs, interval=0.005, timeout=60, what="an extraction in progress")
    kill_worker(job_id)
    assert temp_dirs(), "the kill should have left a half-written extraction dir"
    assert_interrupted(cli, job_id)

    resume_and_wait(cli, job_id)
    assert_archive_in_place(home, archive, members)
    assert not temp_dirs()
    assert not leftovers(home)


def test_a_record_temp_file_left_by_a_kill_mid_write_is_removed_on_resume(datasets, origin, home, cli):
    """A SIGKILL between writing the job record's temp file and renaming it leaves
    ``.ID.json.PID-XXXX.tmp`` in the jobs dir: the resumed worker removes it (a live
    writer's temp file is left alone)."""
    registry, data, _, _ = datasets
    origin.rate = 200_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="the download to start")
    kill_worker(job_id)
    jobs_dir = home / ".prefetch" / "state" / "jobs"
    dead = jobs_dir / f".{job_id}.json.999999-0badc0de.tmp"
    dead.write_text("{half a record", encoding="utf-8")
    live = jobs_dir / f".{job_id}.json.{os.getpid()}-0badc0de.tmp"  # this test process is alive
    live.write_text("{being written", encoding="utf-8")

    origin.rate = None
    resume_and_wait(cli, job_id)
    assert not dead.exists()
    assert live.exists()
    live.unlink()
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()
    assert not leftovers(home)
