"""``list``, ``verify``, ``rm`` and ``clean`` for torchvision: datasets (and splits), weights and
``--torch-hub`` checkpoints: files from a real nginx through --mirror; what prefetch removes
is proven by the real torchvision/torch.hub readers no longer finding it, what it keeps by
them still finding it; a real second user (uid 65534) plants links and files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

from tests import torchvision_synth as synth
from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_jobs import job_id_from, poll, record, stop_leftover_workers  # noqa: F401 - autouse fixture
from tests.test_shared_cache import as_other_user, plant_dirs
from tests.test_torchvision import HUB_LOADER, _state_dict_file


def _md5s(mnist: dict, archive: bytes) -> dict:
    return {"MNIST": {n: synth.md5(d) for n, d in mnist.items()},
            "CIFAR10": {"cifar-10-python.tar.gz": synth.md5(archive),
                        **{k: synth.md5(v) for k, v in synth.cifar10_members().items()}}}


def _load(root: Path, md5s: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """torchvision's own classes read ``root`` with sockets blocked and downloads refused."""
    script = tmp_path / "load_torchvision.py"
    script.write_text(synth.LOADER)
    return subprocess.run([sys.executable, str(script), str(root), json.dumps(md5s)], capture_output=True, text=True,
                          timeout=280, cwd=tmp_path, stdin=subprocess.DEVNULL)


@pytest.fixture
def datasets(nginx_origin, tmp_path):
    mnist, archive = synth.mnist_files(2), synth.cifar10_archive()
    synth.write_files(nginx_origin.root, {**mnist, "cifar-10-python.tar.gz": archive})
    registry = tmp_path / "tv.toml"
    registry.write_text(synth.registry_text({"MNIST": mnist, "CIFAR10": {"cifar-10-python.tar.gz": archive}},
                                            layout=synth.LAYOUT))
    return registry, mnist, archive


def test_list_verify_and_rm_of_datasets_remove_only_what_prefetch_placed(nginx_origin, datasets, home, tmp_path, cli):
    registry, mnist, archive = datasets
    root = tmp_path / "data"
    names = ("torchvision:MNIST", "torchvision:CIFAR10")
    missing = cli("list", *names, "--root", str(root), "--registry", str(registry), "--json")
    assert missing.returncode == 1
    assert [r["state"] for r in json.loads(missing.stdout)["torch"]] == ["missing", "missing"]
    got = cli("get", *names, "--root", str(root), "--registry", str(registry), "--mirror", nginx_origin.url)
    assert got.returncode == 0, got.stderr

    listed = cli("list", *names, "--root", str(root), "--registry", str(registry), "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)["torch"]}
    assert rows["torchvision:MNIST"]["state"] == rows["torchvision:CIFAR10"]["state"] == "complete"
    assert rows["torchvision:MNIST"]["bytes"] > sum(len(d) for d in mnist)  # the .gz and what they decompress to
    plain = cli("list", "--root", str(root), "--registry", str(registry))  # the whole listing has a section
    assert plain.returncode == 0 and "torchvision:CIFAR10" in plain.stdout and "complete" in plain.stdout
    table = cli("list", "torchvision:MNIST", "--root", str(root), "--registry", str(registry))
    assert "torchvision:MNIST" in table.stdout and "complete" in table.stdout, table.stdout

    verified = cli("verify", "torchvision:CIFAR10", "--root", str(root), "--registry", str(registry), "--json")
    assert verified.returncode == 0 and [r["state"] for r in json.loads(verified.stdout)] == ["ok"]
    assert _load(root, _md5s(mnist, archive), tmp_path).returncode == 0

    # The user's own files beside prefetch's: never removed.
    (root / "MNIST" / "raw" / "notes.txt").write_text("mine")
    (root / "cifar-10-batches-py" / "extra.bin").write_bytes(b"x")  # inside what prefetch extracted: goes with it
    (root / "my-model.pt").write_bytes(b"mine too")
    dry = cli("rm", "torchvision:MNIST", "--root", str(root), "--registry", str(registry), "--dry-run", "--json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["removed"]
    assert (root / "MNIST" / "raw" / "t10k-images-idx3-ubyte").exists()
    gone = cli("rm", "torchvision:MNIST", "--root", str(root), "--registry", str(registry), "--json")
    assert gone.returncode == 0, gone.stderr
    removed = {Path(r["path"]).name for r in json.loads(gone.stdout)["removed"]}
    assert set(mnist) <= removed and {n[:-3] for n in mnist} <= removed
    assert sorted(p.name for p in (root / "MNIST" / "raw").iterdir()) == ["notes.txt"]
    assert cli("list", "torchvision:MNIST", "--root", str(root), "--registry", str(registry)).returncode == 1
    # torchvision no longer finds MNIST, and still finds CIFAR-10
    only_mnist = _load(root, {"MNIST": _md5s(mnist, archive)["MNIST"]}, tmp_path)
    assert only_mnist.returncode != 0 and "Dataset not found" in only_mnist.stderr, only_mnist.stderr[-2000:]
    assert _load(root, {"CIFAR10": _md5s(mnist, archive)["CIFAR10"]}, tmp_path).returncode == 0

    gone = cli("rm", "torchvision:CIFAR10", "--root", str(root), "--registry", str(registry))
    assert gone.returncode == 0, gone.stderr
    assert sorted(p.name for p in root.iterdir()) == ["MNIST", "my-model.pt"]


def test_rm_leaves_a_dataset_torchvision_downloaded_itself(datasets, home, tmp_path, cli):
    registry, mnist, archive = datasets
    root = tmp_path / "theirs"
    root.mkdir()
    (root / "cifar-10-python.tar.gz").write_bytes(archive)  # as download_and_extract_archive leaves it
    with tarfile.open(root / "cifar-10-python.tar.gz") as tar:
        tar.extractall(root, filter="data")
    gone = cli("rm", "torchvision:CIFAR10", "--root", str(root), "--registry", str(registry), "--json")
    assert gone.returncode == 0, gone.stderr
    out = json.loads(gone.stdout)
    assert out["removed"] == [] and "not placed by prefetch" in out["not_placed"][0]
    assert (root / "cifar-10-python.tar.gz").read_bytes() == archive
    assert _load(root, {"CIFAR10": _md5s(mnist, archive)["CIFAR10"]}, tmp_path).returncode == 0
    # verify checks it all the same (md5), whoever placed it
    ok = cli("verify", "torchvision:CIFAR10", "--root", str(root), "--registry", str(registry))
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_a_split_is_listed_and_removed_alone(nginx_origin, home, tmp_path, cli):
    synth.write_files(nginx_origin.root, {"a.bin": b"A" * 1000, "b.bin": b"B" * 2000})
    registry = tmp_path / "two.toml"
    registry.write_text('[torchvision.Two]\ndescription = "two splits"\n'
                        f'[[torchvision.Two.files]]\nurls = ["{synth.CLOSED}a.bin"]\nmd5 = "{synth.md5(b"A" * 1000)}"\n'
                        'dir = "Two"\nsplit = "train"\n'
                        f'[[torchvision.Two.files]]\nurls = ["{synth.CLOSED}b.bin"]\nmd5 = "{synth.md5(b"B" * 2000)}"\n'
                        'dir = "Two"\nsplit = "test"\n')
    root = tmp_path / "data"
    args = ("--root", str(root), "--registry", str(registry))
    assert cli("get", "torchvision:Two.train", *args, "--mirror", nginx_origin.url).returncode == 0
    assert cli("list", "torchvision:Two.train", *args).returncode == 0
    assert cli("list", "torchvision:Two.test", *args).returncode == 1
    assert cli("verify", "torchvision:Two.train", *args).returncode == 0
    assert cli("rm", "torchvision:Two.test", *args).returncode == 0
    assert (root / "Two" / "a.bin").exists()
    assert cli("rm", "torchvision:Two.train", *args).returncode == 0
    assert not (root / "Two" / "a.bin").exists()

    import prefetch  # the Python API: remove(..., root=) removes the same, and names what it kept

    prefetch.ensure("torchvision:Two", root=root, registry=str(registry), mirror=nginx_origin.url, progress=False)
    (root / "Two" / "b.bin").unlink()
    (root / "Two" / "b.bin").write_bytes(b"B" * 2000)  # the user's own copy now
    result = prefetch.remove("torchvision:Two", root=root, registry=str(registry))
    assert [Path(r.path).name for r in result.removed if r.reason == "file"] == ["a.bin"]
    assert result.not_placed and "b.bin" in result.not_placed[0]
    assert (root / "Two" / "b.bin").exists()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return _state_dict_file(tmp_path_factory.mktemp("ckpt"))


def _hub_load(url: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "hub_loader.py"
    script.write_text(HUB_LOADER)
    return subprocess.run([sys.executable, str(script), url], capture_output=True, text=True, timeout=280, env=env,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)


def test_weights_and_torch_hub_checkpoints_list_verify_and_rm(nginx_origin, home, tmp_path, checkpoint):
    name, data = checkpoint
    (nginx_origin.root / name).write_bytes(data)
    torch_home = tmp_path / "torch-home"
    hub = torch_home / "hub" / "checkpoints"
    env = dict(os.environ, TORCH_HOME=str(torch_home))
    url = synth.CLOSED + name
    registry = tmp_path / "team.toml"  # the same checkpoint as a weights entry of a model
    registry.write_text(f'[torchvision.squeezenet1_1]\ndefault = "TEAM"\n[torchvision.squeezenet1_1.weights]\n'
                        f'TEAM = "{url}"\n')
    assert run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, env=env).returncode == 0
    # a checkpoint torch.hub downloaded itself: prefetch never placed it
    hub.mkdir(parents=True, exist_ok=True)
    (hub / "resnet18-f37072fd.pth").write_bytes(b"torch.hub's own download")

    listed = run_cli("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)["torch"]}
    assert rows[name]["kind"] == "checkpoint" and rows[name]["state"] == "complete"
    assert rows["torchvision:resnet18.IMAGENET1K_V1"]["kind"] == "weights"
    named = run_cli("list", "torchvision:squeezenet1_1", "--registry", str(registry), "--json", env=env)
    assert named.returncode == 0 and json.loads(named.stdout)["torch"][0]["state"] == "complete", named.stdout

    ok = run_cli("verify", url, "--torch-hub", "--json", env=env)
    assert ok.returncode == 0 and json.loads(ok.stdout)[0]["state"] == "ok", ok.stdout + ok.stderr
    by_path = run_cli("verify", str(hub / name), "--json", env=env)  # a path there: the name's prefix checks it
    assert by_path.returncode == 0 and json.loads(by_path.stdout)[0]["state"] == "ok", by_path.stdout
    assert run_cli("verify", str(hub / "resnet18-f37072fd.pth"), env=env).returncode == 4
    bad = run_cli("verify", "torchvision:resnet18", env=env)  # its name's sha256 prefix does not match
    assert bad.returncode == 4, bad.stdout + bad.stderr

    kept = run_cli("rm", "torchvision:resnet18", "--json", env=env)
    assert kept.returncode == 0 and json.loads(kept.stdout)["removed"] == [], kept.stdout
    assert (hub / "resnet18-f37072fd.pth").exists()
    assert _hub_load(url, env, tmp_path).returncode == 0  # torch.hub finds it in place
    gone = run_cli("rm", "torchvision:squeezenet1_1", "--registry", str(registry), env=env)
    assert gone.returncode == 0, gone.stderr
    assert not (hub / name).exists()
    again = _hub_load(url, env, tmp_path)
    assert again.returncode != 0 and "network use" in again.stderr  # torch.hub would download it now
    # the same through the URL
    assert run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, env=env).returncode == 0
    assert run_cli("rm", url, "--torch-hub", env=env).returncode == 0 and not (hub / name).exists()


def test_clean_removes_what_a_killed_run_left_in_the_checkpoints_and_the_root(home, tmp_path, cli):
    data = os.urandom(3_000_000)
    name = f"big-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    served = tmp_path / "served"
    served.mkdir()
    (served / name).write_bytes(data)
    torch_home = tmp_path / "torch-home"
    hub = torch_home / "hub" / "checkpoints"
    env = dict(os.environ, TORCH_HOME=str(torch_home))
    with NginxServer(served, limit_rate="200k") as nginx:
        started = run_cli("get", synth.CLOSED + name, "--torch-hub", "--mirror", nginx.url, "-b", env=env)
        assert started.returncode == 0, started.stderr
        job = job_id_from(started.stdout)
        poll(lambda: record(job).files and record(job).files[0].bytes >= 400_000, timeout=60, what="some bytes")
        os.kill(record(job).pid, 9)
        poll(lambda: record(job).state == "interrupted", what="the job to show as interrupted")
    assert (hub / (name + ".part")).exists()
    # leftovers of killed runs under a torchvision root: a partial, its state, an extraction's temp dir
    root = tmp_path / "data"
    (root / "MNIST" / "raw").mkdir(parents=True)
    for leftover in (root / "MNIST" / "raw" / "train-images-idx3-ubyte.gz.part",
                     root / "MNIST" / "raw" / "train-images-idx3-ubyte.gz.part.json",
                     root / "cifar-10-python.tar.gz.part"):
        leftover.write_bytes(b"x" * 100)
    (root / ".cifar-10-batches-py.extract-0badf00d").mkdir()
    (tmp_path / ".data.extract-deadbeef").mkdir()  # extraction into the root itself stages beside it
    (root / "MNIST" / "raw" / "mine.txt").write_text("keep")
    listed = run_cli("list", "--root", str(root), "--json", env=env)
    rows = {r["name"]: r for r in json.loads(listed.stdout)["torch"]}
    assert rows[name]["state"] == "partial" and rows["torchvision:MNIST"]["state"] == "partial", rows

    young = run_cli("clean", "--root", str(root), "--older-than", "1h", "--json", env=env)
    left = {Path(r["path"]).name for r in json.loads(young.stdout)["removed"]}
    assert left == {".cifar-10-batches-py.extract-0badf00d", ".data.extract-deadbeef"}  # temps go whatever their age
    # the .part, its .part.json once the run had saved one, and the lock beside it that kill -9 left
    in_hub = {p.name for p in hub.iterdir()}
    assert name + ".part" in in_hub and in_hub <= {name + ".part", name + ".part.json", name + ".part.lock"}, in_hub
    cleaned = run_cli("clean", "--root", str(root), "--older-than", "0", "--json", env=env)
    assert cleaned.returncode == 0, cleaned.stderr
    removed = {Path(r["path"]).name for r in json.loads(cleaned.stdout)["removed"]}
    assert (in_hub - {name + ".part.lock"}) | {"train-images-idx3-ubyte.gz.part", "train-images-idx3-ubyte.gz.part.json",
                                               "cifar-10-python.tar.gz.part"} <= removed
    assert not [p for p in hub.iterdir()]  # the lock file too (gone with the lock, as a finished run's)
    assert sorted(p.name for p in (root / "MNIST" / "raw").iterdir()) == ["mine.txt"]

    import prefetch  # the Python API: the same, with root=
    (root / "cifar-10-python.tar.gz.part").write_bytes(b"y")
    result = prefetch.clean(older_than=0, root=root)
    assert [Path(r.path).name for r in result.removed] == ["cifar-10-python.tar.gz.part"]


def test_rm_never_goes_through_a_link_or_removes_another_users_file(nginx_origin, datasets, home, cli):
    registry, mnist, archive = datasets
    shared = Path(tempfile.mkdtemp(prefix="prefetch-tv-shared-", dir="/tmp"))
    try:
        os.chmod(shared, 0o1777)
        root = shared / "data"
        raw = root / "MNIST" / "raw"
        plant_dirs(root, root / "MNIST", raw)  # the other user's folders, world-writable
        got = cli("get", "torchvision:MNIST", "--root", str(root), "--registry", str(registry),
                  "--mirror", nginx_origin.url)
        assert got.returncode == 0, got.stderr
        victim = shared / "victim"
        victim.write_text("keep me")
        os.chmod(shared, 0o1777)

        def swap():  # in their folder they may replace our entries: a link, and a file of theirs
            os.unlink(raw / "train-images-idx3-ubyte")
            os.symlink(victim, raw / "train-images-idx3-ubyte")
            os.unlink(raw / "t10k-labels-idx1-ubyte.gz")
            (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(mnist["t10k-labels-idx1-ubyte.gz"])
        as_other_user(swap)
        gone = cli("rm", "torchvision:MNIST", "--root", str(root), "--registry", str(registry), "--json")
        assert gone.returncode == 5, gone.stdout + gone.stderr  # another user's entry left: named, exit 5
        out = json.loads(gone.stdout)
        assert victim.read_text() == "keep me"
        assert (raw / "train-images-idx3-ubyte").is_symlink()
        assert (raw / "t10k-labels-idx1-ubyte.gz").read_bytes() == mnist["t10k-labels-idx1-ubyte.gz"]
        assert any("t10k-labels-idx1-ubyte.gz" in line and "another user" in line for line in out["not_ours"])
        assert any("train-images-idx3-ubyte:" in line for line in out["not_placed"] + out["not_ours"])
        assert sorted(p.name for p in raw.iterdir()) == ["t10k-labels-idx1-ubyte.gz", "train-images-idx3-ubyte"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_rm_leaves_a_folder_that_was_there_before_the_extraction_merged_into_it(nginx_origin, datasets, home,
                                                                                tmp_path, cli):
    registry, _mnist, archive = datasets
    root = tmp_path / "data"
    mine = root / "cifar-10-batches-py"
    mine.mkdir(parents=True)
    (mine / "my-notes.txt").write_text("mine")  # the user's folder, before prefetch extracts into it
    args = ("--root", str(root), "--registry", str(registry))
    assert cli("get", "torchvision:CIFAR10", *args, "--mirror", nginx_origin.url).returncode == 0
    assert (mine / "data_batch_1").exists()
    gone = cli("rm", "torchvision:CIFAR10", *args, "--json")
    assert gone.returncode == 0, gone.stderr
    out = json.loads(gone.stdout)
    assert {Path(r["path"]).name for r in out["removed"] if r["reason"] != "marker"} == {"cifar-10-python.tar.gz"}
    assert any("was there before" in line for line in out["not_placed"]), out
    assert (mine / "my-notes.txt").read_text() == "mine"
    # A folder prefetch created is its own, even when the same get runs again and extracts again.
    shutil.rmtree(mine)
    assert cli("get", "torchvision:CIFAR10", *args, "--mirror", nginx_origin.url).returncode == 0
    (root / "cifar-10-batches-py" / "test_batch").unlink()  # damaged: the next get extracts again
    assert cli("get", "torchvision:CIFAR10", *args, "--mirror", nginx_origin.url).returncode == 0
    assert cli("rm", "torchvision:CIFAR10", *args).returncode == 0
    assert not (root / "cifar-10-batches-py").exists() and not (root / "cifar-10-python.tar.gz").exists()
