"""torchvision: names end to end: real torchvision and torch.hub read what prefetch placed, offline.

Synthetic files are served by a real nginx through ``--mirror``; the registry's URLs point
at a closed port. The readers run in a subprocess whose sockets are blocked and whose
torchvision downloader raises (tests/torchvision_synth.py LOADER).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import torchvision_synth as synth
from tests.conftest import run_cli


def _load(root: Path, md5s: dict, tmp_path: Path, env: dict | None = None) -> dict:
    script = tmp_path / "load_torchvision.py"
    script.write_text(synth.LOADER)
    proc = subprocess.run([sys.executable, str(script), str(root), json.dumps(md5s)], capture_output=True, text=True,
                          timeout=280, cwd=tmp_path, stdin=subprocess.DEVNULL, env=env or os.environ.copy())
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _requests(nginx) -> list[str]:
    return [t[5] for t in nginx.timings()] if nginx.timing_log.exists() else []


@pytest.fixture
def served(nginx_origin, tmp_path):
    """MNIST, FashionMNIST and CIFAR10 served by nginx (flat, by file name); the registry; the md5s."""
    classes = {"MNIST": synth.mnist_files(1), "FashionMNIST": synth.mnist_files(2),
               "CIFAR10": {"cifar-10-python.tar.gz": synth.cifar10_archive()}}
    for cls, files in classes.items():
        # The two MNIST-format classes share file names: each is served under its own mirror path.
        synth.write_files(nginx_origin.root / cls, files)
    registry = tmp_path / "torchvision-synth.toml"
    registry.write_text(synth.registry_text(classes, layout=synth.LAYOUT))
    md5s = {cls: {n: synth.md5(d) for n, d in files.items()} for cls, files in classes.items()}
    md5s["CIFAR10"].update({n: synth.md5(d) for n, d in synth.cifar10_members().items()})
    return nginx_origin, registry, md5s, classes


def test_datasets_load_with_download_false_and_true_without_network(served, home, tmp_path):
    nginx, registry, md5s, classes = served
    root = tmp_path / "data"
    for cls in classes:
        got = run_cli("get", f"torchvision:{cls}", "--root", str(root), "--registry", str(registry),
                      "--mirror", nginx.url + cls + "/")
        assert got.returncode == 0, got.stderr

    # Exactly the layout each class checks: the .gz kept beside its decompressed idx file;
    # the CIFAR archive beside its extracted folder.
    for cls in ("MNIST", "FashionMNIST"):
        raw = root / cls / "raw"
        assert sorted(p.name for p in raw.iterdir()) == sorted([*synth.MNIST_FILES, *(n[:-3] for n in synth.MNIST_FILES)])
        import gzip

        for name in synth.MNIST_FILES:
            assert (raw / name).read_bytes() == classes[cls][name]
            assert (raw / name[:-3]).read_bytes() == gzip.decompress(classes[cls][name])
    assert (root / "cifar-10-python.tar.gz").read_bytes() == classes["CIFAR10"]["cifar-10-python.tar.gz"]
    assert sorted(p.name for p in (root / "cifar-10-batches-py").iterdir()) == sorted(synth.cifar10_members())

    before = len(_requests(nginx))
    out = _load(root, md5s, tmp_path)
    for cls in classes:
        for download in (False, True):
            train, test = out[f"{cls}/{download}/True"], out[f"{cls}/{download}/False"]
            rows = (5, 3) if cls == "CIFAR10" else (synth.TRAIN, synth.TEST)
            assert (train[0], test[0]) == rows, (cls, download, train, test)
    assert out["MNIST/True/True"] == out["MNIST/False/True"]

    # A second get finds everything in place: nothing is requested again.
    again = run_cli("get", "torchvision:MNIST", "torchvision:CIFAR10", "--root", str(root), "--registry",
                    str(registry), "--mirror", nginx.url + "MNIST/", "--json")
    assert again.returncode == 0, again.stderr
    assert {r["status"] for r in json.loads(again.stdout)} == {"cached"}
    assert len(_requests(nginx)) == before

    # verify re-hashes what a torchvision: name placed (md5 from the table); a changed byte is exit 4.
    ok = run_cli("verify", "torchvision:MNIST", "--root", str(root), "--registry", str(registry))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("md5 ok") == 4 and ok.stdout.count("unchecked") == 4, ok.stdout
    (root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"changed")
    bad = run_cli("verify", "torchvision:MNIST", "--root", str(root), "--registry", str(registry))
    assert bad.returncode == 4 and "mismatch" in bad.stdout, bad.stdout


def test_a_wrong_hash_exits_4_and_places_nothing(nginx_origin, home, tmp_path):
    # The real CIFAR10 entry (torchvision's md5) and the real resnet18 checkpoint name, served wrong bytes.
    (nginx_origin.root / "cifar-10-python.tar.gz").write_bytes(synth.cifar10_archive())
    (nginx_origin.root / "resnet18-f37072fd.pth").write_bytes(b"not the weights" * 1000)
    root = tmp_path / "data"
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "torch"))
    (nginx_origin.root / "semeion.data").write_bytes(b"1 0 0 1\n" * 100)
    got = run_cli("get", "torchvision:CIFAR10", "--root", str(root), "--mirror", nginx_origin.url, env=env)
    assert got.returncode == 4, got.stderr
    assert "expected 170498071" in got.stderr, got.stderr  # the size is known: refused before hashing
    got = run_cli("get", "torchvision:SEMEION", "--root", str(root), "--mirror", nginx_origin.url, env=env)
    assert got.returncode == 4, got.stderr
    assert "md5 mismatch" in got.stderr and "cb545d371d2ce14ec121470795a77432" in got.stderr, got.stderr
    got = run_cli("get", "torchvision:resnet18", "--mirror", nginx_origin.url, env=env)
    assert got.returncode == 4, got.stderr
    assert "sha256" in got.stderr, got.stderr
    leftovers = [p for p in [*root.rglob("*"), *(tmp_path / "torch").rglob("*")] if p.is_file()]
    assert leftovers == [], leftovers


def _state_dict_file(tmp_path: Path) -> tuple[str, bytes]:
    """squeezenet1_1's architecture with made-up values, saved by torch.save; named as torch.hub
    names checkpoints, ``<model>-<first 8 hex of its sha256>.pth``."""
    code = ("import io, sys, torch, torchvision\n"
            "torch.manual_seed(0)\n"
            "buf = io.BytesIO(); torch.save(torchvision.models.squeezenet1_1().state_dict(), buf)\n"
            "sys.stdout.buffer.write(buf.getvalue())\n")
    data = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=200).stdout
    return f"squeezenet1_1-{hashlib.sha256(data).hexdigest()[:8]}.pth", data


HUB_LOADER = """
import json, socket, sys
def no_network(*a, **k):
    raise AssertionError(f"network use: {a!r}")
socket.socket.connect = no_network
socket.create_connection = no_network
socket.getaddrinfo = no_network
import torch, torch.hub, torchvision
url = sys.argv[1]
state = torch.hub.load_state_dict_from_url(url, check_hash=True)
W = torchvision.models.SqueezeNet1_1_Weights
object.__setattr__(W.IMAGENET1K_V1.value, "url", url)
model = torchvision.models.squeezenet1_1(weights=W.IMAGENET1K_V1)
same = all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
print(json.dumps({"keys": len(state), "same": same, "dir": torch.hub.get_dir()}))
"""


def test_torch_hub_and_models_load_weights_placed_by_torch_hub_flag(nginx_origin, home, tmp_path):
    name, data = _state_dict_file(tmp_path)
    (nginx_origin.root / name).write_bytes(data)
    torch_home = tmp_path / "torch-home"
    env = dict(os.environ, TORCH_HOME=str(torch_home))
    url = synth.CLOSED + name  # what torch.hub is asked for; prefetch gets the bytes through --mirror
    got = run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, env=env)
    assert got.returncode == 0, got.stderr
    placed = torch_home / "hub" / "checkpoints" / name
    assert placed.read_bytes() == data

    script = tmp_path / "hub_loader.py"
    script.write_text(HUB_LOADER)
    proc = subprocess.run([sys.executable, str(script), url], capture_output=True, text=True, timeout=280,
                          env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["same"] and out["keys"] > 10 and out["dir"] == str(torch_home / "hub")

    # A name whose prefix does not match its bytes is refused, as torch.hub would (exit 4).
    wrong = name.replace(name.split("-")[1][:8], "00000000")
    (nginx_origin.root / wrong).write_bytes(data)
    got = run_cli("get", synth.CLOSED + wrong, "--torch-hub", "--mirror", nginx_origin.url, env=env)
    assert got.returncode == 4, got.stderr
    assert not (torch_home / "hub" / "checkpoints" / wrong).exists()
