"""`prefetch wait NAME` after a job that put NAME somewhere of its own kind's choosing.

`wait NAME` waits for the jobs that include NAME, then checks NAME's files are in place by
planning it again from the latest job's request. It took only the Keras root, registries,
`--root`, `-P` and `-o` from that request: a hub repo fetched with `--cache-dir` (or under a
selection, which names an hf:// commit's manifest), or a checkpoint fetched with
`--torch-hub`, was looked for where the job never put it, and `wait` answered, exit 1, that
it was "not in place ... and no job is fetching it; run `prefetch get ...`" right after the job
had put it in place. And `--root` went with every name, so `wait URL` of a job that also
fetched a torchvision dataset was refused as a usage error.
"""

from __future__ import annotations

import hashlib
import os

from tests.conftest import run_cli
from tests.test_hf import hf_env, hub  # noqa: F401 (fixtures)
from tests.torchvision_synth import CLOSED


def test_wait_for_a_hub_repo_fetched_into_a_cache_dir(hf_env, hub, home, tmp_path):
    cache = tmp_path / "hfc"
    started = run_cli("get", "hf://acme/tiny", "--cache-dir", str(cache), "-b", env=hf_env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", "hf://acme/tiny", env=hf_env, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert "hf://acme/tiny in place" in waited.stdout
    commit = hub.repos[("model", "acme/tiny")].commit
    assert (cache / "models--acme--tiny" / "refs" / "main").read_text() == commit
    assert not (home / "hf").exists() or not any((home / "hf").rglob("refs"))  # (nothing in the default cache)


def test_wait_for_a_selection_of_a_hub_commit(hf_env, hub, home, tmp_path):
    commit = hub.repos[("model", "acme/tiny")].commit
    name = f"hf://acme/tiny@{commit}"
    started = run_cli("get", name, "--include", "*.json", "-b", env=hf_env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", name, env=hf_env, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert f"{name} in place" in waited.stdout


def test_wait_for_a_checkpoint_fetched_into_torch_hub(nginx_origin, home, tmp_path):
    data = os.urandom(4096)
    name = f"tiny-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    (nginx_origin.root / name).write_bytes(data)
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "torch"))
    url = CLOSED + name  # what torch.hub is asked for; the bytes come through --mirror
    started = run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, "-b", env=env, cwd=notebook)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", url, env=env, cwd=notebook, timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert (tmp_path / "torch" / "hub" / "checkpoints" / name).read_bytes() == data
    assert not (notebook / name).exists()


def test_a_torchvision_root_does_not_go_with_a_url_of_the_same_job(home, tmp_path, monkeypatch):
    """A job of `get torchvision:MNIST URL --root data`: `wait URL` plans the URL alone, and
    `--root` alone with a URL is a usage error; it is torchvision's field, not the URL's."""
    from prefetch.flow.request import GetRequest
    from prefetch.jobs.record_types import JobRecord
    from prefetch.jobs.wait import dataset_missing

    monkeypatch.chdir(tmp_path)
    url = "http://127.0.0.1:9/weights.bin"
    request = GetRequest(names=["torchvision:MNIST", url], root=str(tmp_path / "data"),
                         output_dir=str(tmp_path / "dl"))
    job = JobRecord(id="j1128-abcd", command="get", request=request.to_dict(), state="done", exit_code=0)
    assert dataset_missing(url, [job]) == str(tmp_path / "dl" / "weights.bin")
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl" / "weights.bin").write_bytes(b"x")
    assert dataset_missing(url, [job]) is None
    # torchvision's own name still gets the job's --root
    assert str(tmp_path / "data") in (dataset_missing("torchvision:MNIST", [job]) or "")


def test_wait_for_a_modelscope_repo_of_a_job_with_its_own_cache(home, tmp_path, monkeypatch):
    """`MODELSCOPE_CACHE` set in the cell that started the job (pinned in its record), not in the
    one that waits: the repo's completion record is looked for under the job's cache root."""
    from prefetch.flow.request import GetRequest
    from prefetch.fs.paths import state_dir
    from prefetch.jobs.record_types import JobRecord
    from prefetch.jobs.wait import dataset_missing
    from prefetch.ms.names import parse_ms_name
    from prefetch.ms.records import record_path

    monkeypatch.delenv("MODELSCOPE_CACHE", raising=False)
    cache = tmp_path / "msc"
    request = GetRequest(names=["ms://acme/tiny"], ms_cache=str(cache))
    job = JobRecord(id="j1128-abce", command="get", request=request.to_dict(), state="done", exit_code=0)
    marker = record_path(state_dir(dict(os.environ)), cache, parse_ms_name("ms://acme/tiny"))
    assert dataset_missing("ms://acme/tiny", [job]) == str(marker)
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    assert dataset_missing("ms://acme/tiny", [job]) is None
