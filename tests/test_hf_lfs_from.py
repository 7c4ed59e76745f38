"""``get hf://... --lfs-from ms://...``: LFS files a ModelScope repo also holds come from there too.

Two local hubs (tests/hub_origin.py, tests/ms_origin.py, both proven with their real
clients in test_hf.py and test_modelscope.py). What lands is checked by the real
huggingface_hub offline; where the bytes came from is read from each hub's request logs.
"""

from __future__ import annotations

import hashlib

import pytest

from tests.faults_net_helpers import closed_port
from tests.hub_origin import HubServer
from tests.ms_origin import MsServer
from tests.origin_faults import Status
from tests.test_hf import assert_offline_loads

WEIGHTS = hashlib.sha256(b"both hubs").digest() * (3 << 15)  # 3 MiB: an LFS file on the Hub, a redirect on ModelScope
SHA = hashlib.sha256(WEIGHTS).hexdigest()
FILES = {
    "config.json": b'{"model_type": "tiny", "hidden_size": 8}\n',
    "model.safetensors": WEIGHTS,
}
HF_TOKEN = "hf_never_sent_to_modelscope_0123456789"


@pytest.fixture
def hubs(home, monkeypatch):
    with HubServer() as hub, MsServer() as ms:
        hub.add_repo("acme/tiny", FILES, lfs={"model.safetensors"})
        ms.add_repo("acme/tiny-ms", {**FILES, "configuration.json": b'{"framework": "pytorch"}\n'})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HOME", str(home / "hf"))
        monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        monkeypatch.setenv("MODELSCOPE_ENDPOINT", ms.url)
        for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "MODELSCOPE_DOMAIN",
                    "MODELSCOPE_API_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        yield hub, ms


def _env():
    import os

    return os.environ.copy()


def _ms_sent(ms: MsServer) -> str:
    """Every header ModelScope and its object store saw."""
    with ms.lock:
        api = "\n".join(str(r.headers) for r in ms.requests)
    return api + "\n".join(str(dict(r.headers.items())) for r in ms.cdn.requests)


def test_the_lfs_file_comes_from_modelscope_when_the_hub_lost_it(hubs, cli, home, monkeypatch):
    monkeypatch.setenv("MODELSCOPE_CACHE", str(home / "ms"))
    hub, ms = hubs
    hub.cdn.remove(f"lfs/{SHA}")  # the Hub's CDN no longer serves the weights

    without = cli("get", "hf://acme/tiny", "--retries", "1", "--timeout", "3")
    assert without.returncode != 0  # the Hub alone cannot make the repo complete

    done = cli("get", "hf://acme/tiny", "--lfs-from", "ms://acme/tiny-ms")
    assert done.returncode == 0, done.stderr
    assert "--lfs-from ms://acme/tiny-ms: 1 of 1 LFS file(s)" in done.stderr
    assert_offline_loads(_env(), "acme/tiny", FILES)
    assert len(ms.cdn.data_requests(ms._cdn_name(ms.repos[("models", "acme/tiny-ms")], "model.safetensors"))) >= 1
    assert HF_TOKEN not in _ms_sent(ms)  # the Hub's token stays on the Hub
    # ModelScope's cache is not touched: the repo lands in the Hugging Face cache only.
    assert not (home / "ms").exists() and not (home / ".cache" / "modelscope").exists()


def test_a_copy_that_does_not_match_the_hubs_sha256_is_fetched_again_from_the_hub(hubs, cli):
    hub, ms = hubs
    other = hashlib.sha256(b"not the same weights").digest() * (3 << 15)  # same size, other bytes
    ms.add_repo("acme/liar", {"model.safetensors": other}, listed_sha256={"model.safetensors": SHA})
    hub.cdn.add_fault(Status(path=f"lfs/{SHA}", code=404))  # the first Hub answer fails: ModelScope's bytes are used

    done = cli("get", "hf://acme/tiny", "--lfs-from", "ms://acme/liar")
    assert done.returncode == 0, done.stderr
    assert "downloading it again from the Hub alone" in done.stderr
    assert_offline_loads(_env(), "acme/tiny", FILES)
    # ModelScope's bytes were taken, and refused by the Hub's sha256:
    assert len(ms.cdn.data_requests(ms._cdn_name(ms.repos[("models", "acme/liar")], "model.safetensors"))) >= 1


def test_an_unreachable_modelscope_costs_a_note_not_the_download(hubs, cli, monkeypatch):
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    done = cli("get", "hf://acme/tiny", "--lfs-from", "ms://acme/tiny-ms", "--retries", "1", "--timeout", "3")
    assert done.returncode == 0, done.stderr
    assert "--lfs-from ms://acme/tiny-ms not used" in done.stderr
    assert_offline_loads(_env(), "acme/tiny", FILES)


def test_a_complete_repo_does_not_list_modelscope(hubs, cli):
    hub, ms = hubs
    assert cli("get", "hf://acme/tiny").returncode == 0
    with ms.lock:
        ms.requests.clear()
    again = cli("get", "hf://acme/tiny", "--lfs-from", "ms://acme/tiny-ms")
    assert again.returncode == 0, again.stderr
    with ms.lock:
        assert ms.requests == []  # every blob is in place: nothing to ask ModelScope


@pytest.mark.parametrize("args, words", [
    (["hf://acme/tiny", "hf://acme/other", "--lfs-from", "ms://acme/tiny-ms"], "one hf:// repo"),
    (["hf://acme/tiny", "--lfs-from", "hf://acme/tiny"], "--lfs-from takes a ModelScope repo"),
])
def test_lfs_from_misuse_is_one_line_and_exit_2(hubs, cli, args, words):
    done = cli("get", *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in done.stderr


def test_the_python_api_takes_lfs_from(hubs, home):
    """``prefetch.ensure(..., lfs_from=...)`` in a fresh interpreter (the API reads the env at call time)."""
    import subprocess
    import sys

    hub, ms = hubs
    hub.cdn.remove(f"lfs/{SHA}")
    code = ("import prefetch; r = prefetch.ensure('hf://acme/tiny', lfs_from='ms://acme/tiny-ms', progress=False); "
            "print(r[-1].status)")
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "downloaded"
    assert_offline_loads(_env(), "acme/tiny", FILES)


def test_a_background_job_keeps_lfs_from(hubs, cli):
    hub, ms = hubs
    hub.cdn.remove(f"lfs/{SHA}")  # only ModelScope can give the weights: the job must still know --lfs-from
    started = cli("get", "hf://acme/tiny", "--lfs-from", "ms://acme/tiny-ms", "-b")
    assert started.returncode == 0, started.stderr
    waited = cli("wait")
    assert waited.returncode == 0, waited.stderr
    assert_offline_loads(_env(), "acme/tiny", FILES)
