"""A user registry adds or overrides torchvision weights entries, as it does datasets: a team's
own checkpoint under a model's name, with its full sha256 and its URLs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import torchvision_synth as synth
from tests.conftest import run_cli
from tests.test_torchvision import HUB_LOADER, _state_dict_file


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return _state_dict_file(tmp_path_factory.mktemp("ckpt"))[1]


def _team_entry(model: str, entry: str, urls: list[str], sha256: str, *, default: bool, name: str | None = None) -> str:
    text = f"[torchvision.{model}]\n" + (f'default = "{entry}"\n' if default else "")
    text += f"[torchvision.{model}.weights.{entry}]\nurls = {json.dumps(urls)}\nsha256 = \"{sha256}\"\n"
    return text + (f'name = "{name}"\n' if name else "")


def test_a_team_checkpoint_in_registry_toml_becomes_the_models_default_and_torch_loads_it(
        nginx_origin, home, tmp_path, checkpoint):
    name = "squeezenet1_1-team.pth"  # no sha256 prefix in the name: the registry's full sha256 checks it
    (nginx_origin.root / name).write_bytes(checkpoint)
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    # The first URL is closed: the second (byte-identical) one serves it.
    (config / "registry.toml").write_text(_team_entry(
        "squeezenet1_1", "TEAM_V1", [synth.CLOSED + name, nginx_origin.url_for(name)],
        hashlib.sha256(checkpoint).hexdigest(), default=True))
    torch_home = tmp_path / "torch-home"
    env = dict(os.environ, TORCH_HOME=str(torch_home))
    got = run_cli("get", "torchvision:squeezenet1_1", env=env)
    assert got.returncode == 0, got.stderr
    placed = torch_home / "hub" / "checkpoints" / name
    assert placed.read_bytes() == checkpoint
    # torchvision's own entry is still there under its name
    from prefetch.flow.planning import plan_request
    from prefetch.flow.request import GetRequest

    (builtin,), _ = plan_request(GetRequest(names=["torchvision:squeezenet1_1.IMAGENET1K_V1"]), env=env)
    assert builtin.final.name == "squeezenet1_1-b8a52dc0.pth"

    verified = run_cli("verify", "torchvision:squeezenet1_1", "--json", env=env)
    assert verified.returncode == 0, verified.stderr
    (row,) = json.loads(verified.stdout)
    assert row["state"] == "ok" and row["expected"] == hashlib.sha256(checkpoint).hexdigest()

    script = tmp_path / "hub_loader.py"
    script.write_text(HUB_LOADER)
    proc = subprocess.run([sys.executable, str(script), synth.CLOSED + name], capture_output=True, text=True,
                          timeout=280, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["same"]


def test_overriding_a_builtin_entry_with_a_wrong_sha256_fails_with_exit_4_and_places_nothing(
        nginx_origin, home, tmp_path, checkpoint):
    name = "squeezenet1_1-b8a52dc0.pth"  # torchvision's own name for IMAGENET1K_V1
    (nginx_origin.root / name).write_bytes(checkpoint)
    registry = tmp_path / "team.toml"
    registry.write_text(_team_entry("squeezenet1_1", "IMAGENET1K_V1", [synth.CLOSED + name], "0" * 64, default=False))
    torch_home = tmp_path / "torch-home"
    env = dict(os.environ, TORCH_HOME=str(torch_home))
    got = run_cli("get", "torchvision:squeezenet1_1.IMAGENET1K_V1", "--registry", str(registry),
                  "--mirror", nginx_origin.url, env=env)
    assert got.returncode == 4, got.stderr
    assert "sha256" in got.stderr
    assert not [p for p in torch_home.rglob("*") if p.is_file()]
    # the right sha256 (the override's URL and hash, not torchvision's): placed
    registry.write_text(_team_entry("squeezenet1_1", "IMAGENET1K_V1", [synth.CLOSED + name],
                                    hashlib.sha256(checkpoint).hexdigest(), default=False))
    got = run_cli("get", "torchvision:squeezenet1_1", "--registry", str(registry), "--mirror", nginx_origin.url,
                  env=env)
    assert got.returncode == 0, got.stderr
    assert (torch_home / "hub" / "checkpoints" / name).read_bytes() == checkpoint


@pytest.mark.parametrize("body, message", [
    ('[torchvision.resnet50]\nweights = {}\n', "weights must be a table"),
    ('[torchvision.resnet50]\ndefault = "NOPE"\n[torchvision.resnet50.weights]\nX = "https://h/x.pth"\n',
     "default 'NOPE' is not one of its weights"),
    ('[torchvision.resnet50.weights.X]\nurls = ["ftp://h/x.pth"]\n', "urls"),
    ('[torchvision.resnet50.weights.X]\nurls = ["https://h/x.pth"]\nsha256 = "abc"\n', "sha256"),
    ('[torchvision.resnet50.weights.X]\nurls = ["https://h/x.pth"]\nname = "../x"\n', "plain file name"),
])
def test_a_bad_weights_entry_is_refused_before_anything_starts(home, tmp_path, cli, body, message):
    registry = tmp_path / "bad.toml"
    registry.write_text(body)
    got = cli("get", "torchvision:resnet50", "--registry", str(registry))
    assert got.returncode == 2, got.stderr
    assert message in got.stderr, got.stderr
