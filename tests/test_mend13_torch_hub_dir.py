"""``get URL --torch-hub -P DIR`` is ``torch.hub.set_dir(DIR)``: the checkpoint goes to
``DIR/checkpoints/<name>`` (checked by its name's sha256 prefix), where the real torch, its hub
dir set to DIR, reads it with no network (the URL's port is closed; the bytes come from an
nginx on 127.0.0.1 through --mirror). A relative DIR is where it was typed, in a ``-b`` job too."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.test_jobs import job_id_from, stop_leftover_workers  # noqa: F401 - autouse fixture
from tests.test_layout_hostile12b_torch_hub import _checkpoint
from tests.torchvision_synth import CLOSED

READ = r"""
import json, sys, torch.hub
url, hub_dir = sys.argv[1:]
torch.hub.set_dir(hub_dir)
sd = torch.hub.load_state_dict_from_url(url, check_hash=True, progress=False)
print(json.dumps({"w": sd["w"].tolist(), "get_dir": torch.hub.get_dir()}))
"""


def _torch_reads(url: str, hub_dir, env) -> dict:
    proc = subprocess.run([sys.executable, "-c", READ, url, str(hub_dir)], capture_output=True, text=True,
                          timeout=280, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_torch_hub_with_P_is_torch_hub_set_dir(nginx_origin, home, tmp_path):
    data = _checkpoint(13)
    name = f"tiny-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    (nginx_origin.root / name).write_bytes(data)
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "th"))  # (not where -P puts it)
    work = tmp_path / "notebook"
    work.mkdir()
    placed = run_cli("get", CLOSED + name, "--torch-hub", "--mirror", nginx_origin.url, "-P", "hubdir", "-q",
                     env=env, cwd=work)
    assert placed.returncode == 0, placed.stderr
    assert (work / "hubdir" / "checkpoints" / name).read_bytes() == data
    assert not (tmp_path / "th").exists()
    read = _torch_reads(CLOSED + name, work / "hubdir", env)
    assert read == {"w": [13.0, 14.0, 15.0], "get_dir": str(work / "hubdir")}, read

    # A background job: the relative DIR is the caller's, not the worker's (the jobs folder).
    started = run_cli("get", CLOSED + name, "--torch-hub", "--mirror", nginx_origin.url, "-P", "hub2", "-b",
                      env=env, cwd=work)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    assert run_cli("wait", job, env=env, cwd=tmp_path, timeout=120).returncode == 0
    assert (work / "hub2" / "checkpoints" / name).read_bytes() == data
    status = json.loads(run_cli("status", job, "--json", env=env).stdout)
    assert f"-P {work / 'hub2'}" in status["jobs"][0]["command"], status  # retyped anywhere, the same dir
    assert _torch_reads(CLOSED + name, work / "hub2", env)["w"] == [13.0, 14.0, 15.0]


def test_torch_hub_still_refuses_o_and_extract(home, tmp_path):
    for extra in (["-o", "x.pth"], ["--extract"]):
        refused = run_cli("get", CLOSED + "tiny-00000000.pth", "--torch-hub", *extra, cwd=tmp_path)
        assert refused.returncode == 2 and "--torch-hub" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
