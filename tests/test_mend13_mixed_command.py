"""A background job of dataset names and ``hf://`` repos whose Keras root and hub cache differ
(the API's ``cache_dir=`` for the datasets, the hub's own cache): no one ``--cache-dir`` says
both, and the recorded command left the Keras root out. Its command line now sets
``KERAS_HOME=`` before ``prefetch``; retyped in a shell elsewhere, it means the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.test_hf import MODEL_FILES, hf_env, hub  # noqa: F401 (fixtures)
from tests.test_jobs import job_id_from, stop_leftover_workers, synth  # noqa: F401 (fixtures)


def _command(env, cwd) -> str:
    status = run_cli("status", "--json", env=env, cwd=cwd)
    assert status.returncode == 0, status.stderr
    return json.loads(status.stdout)["jobs"][-1]["command"]


def test_a_mixed_jobs_command_keeps_the_keras_root_when_it_differs(hf_env, hub, synth, home, tmp_path):
    registry, data = synth
    keras = tmp_path / "my keras"  # (a space: the command line quotes it where a shell reads it)
    code = ("import prefetch, sys\n"
            "job = prefetch.ensure(['synth', 'hf://acme/tiny'], registry=sys.argv[1], cache_dir=sys.argv[2],"
            " background=True)\n"
            "print('started job', job.id)\n")
    started = subprocess.run([sys.executable, "-c", code, str(registry), str(keras)], env=hf_env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    assert run_cli("wait", job, env=hf_env, cwd=tmp_path, timeout=120).returncode == 0
    assert (keras / "datasets" / "synth.bin").read_bytes() == data
    hub_dir = home / "hf" / "hub" / "models--acme--tiny"
    assert hub_dir.is_dir()
    command = _command(hf_env, tmp_path)
    assert command.startswith(f"KERAS_HOME='{keras}' HF_HUB_CACHE={home / 'hf' / 'hub'} "
                              f"HF_ENDPOINT={hf_env['HF_ENDPOINT']} prefetch get synth hf://acme/tiny "), command
    assert "--cache-dir" not in command, command

    # Retyped in a shell from another folder, the roots emptied: the same places again.
    (keras / "datasets" / "synth.bin").unlink()
    subprocess.run(["rm", "-rf", str(hub_dir)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bindir = tmp_path / "bin"  # `prefetch` on PATH: this interpreter's
    bindir.mkdir()
    (bindir / "prefetch").write_text(f"#!/bin/sh\nexec {sys.executable} -m prefetch \"$@\"\n")
    (bindir / "prefetch").chmod(0o755)
    env = dict(hf_env, PATH=f"{bindir}{os.pathsep}{hf_env['PATH']}")
    env.pop("HF_HOME")  # (the command says where the hub's cache is)
    retyped = subprocess.run(["sh", "-c", command], env=env, cwd=elsewhere, capture_output=True, text=True,
                             timeout=60)
    assert retyped.returncode == 0, retyped.stderr
    again = job_id_from(retyped.stdout)
    assert run_cli("wait", again, env=hf_env, cwd=tmp_path, timeout=120).returncode == 0
    assert (keras / "datasets" / "synth.bin").read_bytes() == data
    assert (hub_dir / "snapshots").is_dir()
    assert _command(hf_env, tmp_path) == command
