"""A background job the Python API starts with ``ms_cache=`` or ``nltk_data=`` records a
command line that says where the files go: the CLI has no option for either root (the
environment says it: ``MODELSCOPE_CACHE``, ``NLTK_DATA``), and the recorded command left them
out, so retyped in another shell the files went to that shell's caches. The command now sets
them before ``prefetch``; retyped through sh elsewhere, with neither variable set, it means the
same."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.nltk_origin import write_gh_pages
from tests.test_jobs import job_id_from, stop_leftover_workers  # noqa: F401 - autouse fixture
from tests.test_modelscope import MODEL, ms, ms_env  # noqa: F401 - fixtures
from tests.test_mend13_retypable import _on_path
from tests.test_nltk import STOPWORDS


def _command(job, env) -> str:
    return json.loads(run_cli("status", job, "--json", env=env).stdout)["jobs"][0]["command"]


def _start(code: str, env, cwd, *args) -> str:
    started = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, cwd=cwd,
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    return job_id_from(started.stdout)


def _retype(command, env, tmp_path) -> str:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    retyped = subprocess.run(["sh", "-c", command], env=_on_path(tmp_path, env), cwd=elsewhere,
                             capture_output=True, text=True, timeout=60)
    assert retyped.returncode == 0, retyped.stderr
    assert not list(elsewhere.iterdir())
    return job_id_from(retyped.stdout)


def test_an_api_jobs_ms_cache_is_in_its_command(ms_env, ms, home, tmp_path):
    cache = tmp_path / "my ms"  # (a space: the command quotes it)
    code = ("import prefetch, sys\n"
            "job = prefetch.ensure(['ms://acme/tiny'], ms_cache=sys.argv[1], background=True)\n"
            "print('started job', job.id)\n")
    job = _start(code, ms_env, tmp_path, cache)
    assert run_cli("wait", job, env=ms_env, timeout=120).returncode == 0
    placed = cache / "models" / "acme--tiny" / "snapshots" / "master" / "config.json"
    assert placed.read_bytes() == MODEL["config.json"]
    command = _command(job, ms_env)
    assert command.startswith(f"MODELSCOPE_CACHE='{cache}' MODELSCOPE_ENDPOINT={ms_env['MODELSCOPE_ENDPOINT']} "
                              "prefetch get ms://acme/tiny "), command

    subprocess.run(["rm", "-rf", str(cache)], check=True)
    env = dict(ms_env)
    env.pop("MODELSCOPE_CACHE")  # (the shell's default would be ~/.cache/modelscope)
    again = _retype(command, env, tmp_path)
    assert run_cli("wait", again, env=ms_env, timeout=120).returncode == 0
    assert placed.read_bytes() == MODEL["config.json"]
    assert _command(again, ms_env) == command


def test_an_api_jobs_nltk_data_is_in_its_command(home, nginx_origin, tmp_path):
    write_gh_pages(nginx_origin.root)
    data = tmp_path / "my nltk"
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    code = ("import prefetch, sys\n"
            "job = prefetch.ensure(['nltk:stopwords'], nltk_data=sys.argv[1], mirror=sys.argv[2], background=True)\n"
            "print('started job', job.id)\n")
    job = _start(code, env, tmp_path, data, nginx_origin.url_for(""))
    assert run_cli("wait", job, env=env, timeout=120).returncode == 0
    placed = data / "corpora" / "stopwords" / "english"
    assert placed.read_text().split() == STOPWORDS
    command = _command(job, env)
    assert command.startswith(f"NLTK_DATA='{data}' prefetch get nltk:stopwords "), command

    subprocess.run(["rm", "-rf", str(data)], check=True)
    again = _retype(command, env, tmp_path)
    assert run_cli("wait", again, env=env, timeout=120).returncode == 0
    assert placed.read_text().split() == STOPWORDS
    assert _command(again, env) == command
