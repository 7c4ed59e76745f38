"""torch.hub's checkpoints dir from a relative TORCH_HOME, for a background job.

torch.hub expands ``TORCH_HOME`` (or ``XDG_CACHE_HOME``) against the process's current
directory: a notebook's ``TORCH_HOME=weights`` is ``<notebook dir>/weights``. A ``-b`` worker
starts in prefetch's jobs folder and computed the dir there: the weights went to
``<state>/jobs/weights/hub/checkpoints/``, ``wait`` said done, and torch.hub downloaded them
again. The dir is fixed when the job starts now, as hf://, ms:// and nltk: roots are.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.torchvision_synth import CLOSED

LOADER = """
import json, sys, torch.hub
sd = torch.hub.load_state_dict_from_url(sys.argv[1], check_hash=True, progress=False)
print(json.dumps({"w": sd["w"].tolist(), "dir": torch.hub.get_dir()}))
"""


def state_dict_file() -> tuple[str, bytes]:
    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.arange(4, dtype=torch.float32)}, buf)
    data = buf.getvalue()
    return f"tiny-{hashlib.sha256(data).hexdigest()[:8]}.pth", data


def test_a_background_job_places_under_a_relative_torch_home_where_torch_hub_looks(nginx_origin, home, tmp_path):
    name, data = state_dict_file()
    (nginx_origin.root / name).write_bytes(data)
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    env = dict(os.environ, TORCH_HOME="weights")  # relative: the notebook's ./weights
    url = CLOSED + name  # what torch.hub is asked for; prefetch gets the bytes through --mirror
    started = run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, "-b", env=env, cwd=notebook)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", "--timeout", "120", env=env, cwd=notebook)
    assert waited.returncode == 0, waited.stderr
    placed = notebook / "weights" / "hub" / "checkpoints" / name
    assert placed.read_bytes() == data
    script = tmp_path / "loader.py"
    script.write_text(LOADER)
    proc = subprocess.run([sys.executable, str(script), url], capture_output=True, text=True, timeout=280,
                          env=env, cwd=notebook, stdin=subprocess.DEVNULL)  # the URL's port is closed
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["w"] == [0.0, 1.0, 2.0, 3.0] and out["dir"] == "weights/hub"


def test_weights_names_are_pinned_too(home, tmp_path, monkeypatch):
    """``torchvision:resnet50 -b``: the same pin, then planned from another directory (the worker's)."""
    from prefetch.flow.planners.torchvision import PLANNER
    from prefetch.flow.planning import plan_request
    from prefetch.flow.request import GetRequest

    notebook, worker = tmp_path / "notebook", tmp_path / "worker"
    notebook.mkdir()
    worker.mkdir()
    monkeypatch.setenv("TORCH_HOME", "weights")
    monkeypatch.chdir(notebook)
    pinned = PLANNER.pin(GetRequest(names=["torchvision:resnet50"]), dict(os.environ))
    assert pinned.torch_checkpoints == str(notebook / "weights" / "hub" / "checkpoints")
    monkeypatch.chdir(worker)
    plans, _ = plan_request(GetRequest.from_dict(json.loads(json.dumps(pinned.to_dict()))))
    assert [p.final.parent for p in plans] == [notebook / "weights" / "hub" / "checkpoints"]
