"""The Python API: prefetch.ensure(), prefetch.wait(), prefetch.status()."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

import prefetch
from prefetch.errors import (
    IntegrityError,
    JobNotFoundError,
    NetworkError,
    NotDownloadedError,
    UnknownDatasetError,
    WaitTimeoutError,
)
from tests.test_jobs import (
    poll,
    sha256_of,
    stop_leftover_workers,  # noqa: F401 - autouse fixture
    write_synth_registry,
)


@pytest.fixture
def registry(home, origin, tmp_path):
    """The (registry path, synth.bin bytes) of test_jobs: synth, missing (404), badhash."""
    return write_synth_registry(tmp_path / "registry.toml", origin)


def test_import_prefetch_stays_light():
    code = "import sys, prefetch; print(sorted(m for m in ('requests', 'rich', 'click', 'tqdm', 'prefetch.jobs') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_ensure_foreground_returns_results_and_raises_the_failure_class(registry, home):
    path, data = registry
    results = prefetch.ensure("synth", registry=path)
    assert [(r.name, r.status) for r in results] == [("synth.bin", "downloaded")]
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()
    assert [r.status for r in prefetch.ensure(["synth"], registry=path)] == ["cached"]
    with pytest.raises(NetworkError) as info:
        prefetch.ensure("missing", registry=path)
    assert info.value.exit_code == 3 and "404" in str(info.value)
    with pytest.raises(IntegrityError):
        prefetch.ensure("badhash", registry=path)
    with pytest.raises(UnknownDatasetError):
        prefetch.ensure("nosuchdataset", registry=path)
    with pytest.raises(TypeError):
        prefetch.ensure("synth", registry=path, colour=True)


def test_ensure_background_then_wait_for_the_dataset_like_a_training_script(registry, origin, home):
    path, data = registry
    origin.rate = 300_000
    job = prefetch.ensure(["synth"], background=True, registry=path, connections=1)
    assert job.id and job.pid and job.log_path.name == f"{job.id}.log"
    listed = prefetch.status()
    assert [j.id for j in listed] == [job.id]
    assert listed[0].state in ("queued", "running")

    with pytest.raises(WaitTimeoutError):
        prefetch.wait("synth", timeout=0.2)
    result = prefetch.wait("synth")
    assert result.datasets == ["synth"]
    assert [j.id for j in result.jobs] == [job.id]
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()
    one = prefetch.status(job.id)
    assert one.state == "done" and one.files[0].state == "done" and one.files[0].bytes == len(data)
    assert prefetch.wait(job.id).jobs[0].exit_code == 0
    assert prefetch.wait().exit_code == 0  # every job on record


def test_wait_raises_the_class_of_a_failed_job(registry):
    path, _ = registry
    job = prefetch.ensure("missing", background=True, registry=path)
    with pytest.raises(NetworkError) as info:
        prefetch.wait("missing")
    assert job.id in str(info.value)
    with pytest.raises(NetworkError):
        prefetch.wait([job.id])
    bad = prefetch.ensure("badhash", background=True, registry=path)
    with pytest.raises(IntegrityError):
        prefetch.wait(bad.id)


def test_wait_for_a_dataset_without_a_job_checks_the_files(home):
    with pytest.raises(NotDownloadedError) as info:
        prefetch.wait("mnist")  # built-in, not downloaded, no job
    assert "mnist.npz" in str(info.value) and info.value.exit_code == 1
    (home / ".keras" / "datasets").mkdir(parents=True)
    (home / ".keras" / "datasets" / "mnist.npz").write_bytes(b"complete files only ever get here")
    assert prefetch.wait("mnist").datasets == ["mnist"]
    with pytest.raises(UnknownDatasetError):
        prefetch.wait("nosuchdataset")
    with pytest.raises(JobNotFoundError):
        prefetch.wait("j0101-dead")


def test_status_reports_a_killed_worker_as_interrupted(registry, origin):
    import os
    import signal

    path, _ = registry
    origin.rate = 100_000
    job = prefetch.ensure("synth", background=True, registry=path, connections=1)
    poll(lambda: prefetch.status(job.id).files[0].bytes > 0, what="bytes on disk")
    os.kill(prefetch.status(job.id).pid, signal.SIGKILL)
    rec = poll(lambda: (r := prefetch.status(job.id)).state == "interrupted" and r, what="interrupted")
    assert rec.exit_code == 7 and rec.files[0].state == "interrupted"
    with pytest.raises(prefetch.InterruptedTransferError):
        prefetch.wait(job.id)
