"""torchvision: names with the rest of prefetch: jobs killed and resumed, Keras's copy reused,
the Python API, planted links, a notebook cell, planning without torch."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests import torchvision_synth as synth
from tests.nginx import NginxServer
from tests.test_jobs import (
    job_id_from,
    leftovers,
    poll,
    record,
    stop_leftover_workers,  # noqa: F401 - autouse fixture
    synthetic,
)


def _big_class_registry(path: Path, data: bytes) -> Path:
    """A class the user adds: one 4 MB file under root/Big/."""
    path.write_text(synth.registry_text({"Big": {"big.bin": data}}, layout={"Big": {"dir": "Big"}}))
    return path


def test_sigkill_mid_download_then_resume_resends_few_bytes(home, tmp_path, cli):
    data = synthetic(4_000_000, seed=5)
    served = tmp_path / "served"
    synth.write_files(served, {"big.bin": data})
    registry = _big_class_registry(tmp_path / "big.toml", data)
    root = tmp_path / "data"
    with NginxServer(served, limit_rate="250k") as nginx:
        started = cli("get", "torchvision:Big", "--root", str(root), "--registry", str(registry), "--mirror",
                      nginx.url, "--connections", "2", "-b")
        assert started.returncode == 0, started.stderr
        job_id = job_id_from(started.stdout)
        poll(lambda: record(job_id).files and record(job_id).files[0].bytes >= 1_000_000, timeout=60,
             what="a quarter of the body")
        os.kill(record(job_id).pid, signal.SIGKILL)
        poll(lambda: record(job_id).state == "interrupted", what="the job to show as interrupted")
        part = root / "Big" / "big.bin.part"
        assert part.exists() and not (root / "Big" / "big.bin").exists()
        on_disk = record(job_id).files[0].bytes

        resumed = cli("resume", job_id)
        assert resumed.returncode == 0, resumed.stderr
        assert cli("wait", job_id, timeout=120).returncode == 0
        waited = cli("wait", "torchvision:Big", timeout=60)  # by name: the job's --root is used
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert (root / "Big" / "big.bin").read_bytes() == data
        sent = [t for t in nginx.timings()]
    # nginx logs each request when it ends (the killed ones too). Every body byte beyond the
    # file's size was sent twice: what the killed run had received but not yet recorded.
    # Bounded, and less than what was on disk: starting over would re-send all of that.
    resent = sum(t[3] for t in sent) - len(data)
    assert 0 <= resent < min(1024 * 1024, on_disk), (resent, on_disk)
    assert not leftovers(root)


def test_a_file_keras_already_has_is_linked_not_downloaded_and_ensure_works(nginx_origin, home, tmp_path):
    import prefetch

    archive = synth.cifar10_archive()
    (nginx_origin.root / "cifar-10-python.tar.gz").write_bytes(archive)
    keras_registry = tmp_path / "both.toml"
    keras_registry.write_text(
        synth.registry_text({"CIFAR10": {"cifar-10-python.tar.gz": archive}}, layout=synth.LAYOUT)
        + "\n[cifar10]\ndescription = \"synthetic cifar10\"\n[[cifar10.files]]\nname = \"cifar-10-python.tar.gz\"\n"
        f"url = \"{synth.CLOSED}cifar-10-python.tar.gz\"\ntarget = \"cifar-10-batches-py.tar.gz\"\n"
        f"md5 = \"{synth.md5(archive)}\"\nextract = [\".\"]\n"
    )
    prefetch.ensure("cifar10", registry=str(keras_registry), mirror=nginx_origin.url, progress=False)
    keras_copy = home / ".keras" / "datasets" / "cifar-10-batches-py.tar.gz"
    assert keras_copy.read_bytes() == archive
    requests_before = len(nginx_origin.timings())

    root = tmp_path / "data"
    results = prefetch.ensure("torchvision:CIFAR10", root=root, registry=str(keras_registry),
                              mirror=nginx_origin.url, progress=False)
    placed = root / "cifar-10-python.tar.gz"
    assert [r.path for r in results] == [str(placed)]
    assert placed.stat().st_ino == keras_copy.stat().st_ino  # one copy on disk, two names
    assert len(nginx_origin.timings()) == requests_before  # nothing downloaded
    assert sorted(p.name for p in (root / "cifar-10-batches-py").iterdir()) == sorted(synth.cifar10_members())


def test_no_write_through_a_planted_link(nginx_origin, home, tmp_path, cli):
    registry = tmp_path / "mnist.toml"
    files = synth.served_mnist(nginx_origin.root, registry, 1)
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    for name in ("train-images-idx3-ubyte", "t10k-labels-idx1-ubyte.gz"):
        (raw / name).symlink_to(victim)
    got = cli("get", "torchvision:MNIST", "--root", str(tmp_path / "data"), "--registry", str(registry),
              "--mirror", nginx_origin.url)
    # Refused (exit 5: local filesystem), named, never followed; the other files are placed.
    assert got.returncode == 5, got.stderr
    assert f"refusing to use {raw / 'train-images-idx3-ubyte'}: it is a symbolic link" in got.stderr
    assert f"refusing to use {raw / 't10k-labels-idx1-ubyte.gz'}: it is a symbolic link" in got.stderr
    assert victim.read_text() == "keep me"
    assert (raw / "train-labels-idx1-ubyte.gz").read_bytes() == files["train-labels-idx1-ubyte.gz"]
    assert (raw / "train-labels-idx1-ubyte").stat().st_size > 0
    # The .gz whose decompressed name is refused is not placed either (complete or absent); its
    # verified .part stays for the next run, and no temp file is left.
    assert not (raw / "train-images-idx3-ubyte.gz").exists()
    assert not [p for p in raw.iterdir() if p.name.endswith(".tmp")]


def test_background_get_from_a_notebook_cell_then_torchvision_loads(kernel, nginx_origin, tmp_path):
    registry = tmp_path / "mnist.toml"
    synth.served_mnist(nginx_origin.root, registry, 4)
    root = tmp_path / "nb-data"
    started = kernel.run(f"!prefetch get torchvision:MNIST --root {root} --registry {registry} "
                         f"--mirror {nginx_origin.url} -b", timeout=60)
    assert "started job" in started.rendered, started.rendered
    waited = kernel.run("!prefetch wait", timeout=120)
    assert "done" in waited.rendered, waited.rendered
    loaded = kernel.run(
        "import socket\n"
        "socket.socket.connect = lambda *a, **k: (_ for _ in ()).throw(AssertionError('network'))\n"
        "import torchvision\n"
        f"ds = torchvision.datasets.MNIST({str(root)!r}, train=False, download=True)\n"
        "print('loaded', len(ds), tuple(ds.data.shape))", timeout=240)
    assert loaded.error is None, loaded.error
    assert f"loaded {synth.TEST} ({synth.TEST}, 28, 28)" in loaded.rendered, loaded.rendered


def _plan(names, **fields):
    from prefetch.flow.planning import plan_request
    from prefetch.flow.request import GetRequest

    plans, _ = plan_request(GetRequest(names=list(names), **fields))
    return plans


def test_weights_names_plan_into_torch_hub_without_importing_torch(home, monkeypatch, tmp_path):
    import sys

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    hub = tmp_path / "th" / "hub" / "checkpoints"
    default, v1, effnet = _plan(["torchvision:resnet50", "torchvision:resnet50.IMAGENET1K_V1",
                                 "torchvision:efficientnet_b0"])
    assert default.final == hub / "resnet50-11ad3fa6.pth"  # DEFAULT is IMAGENET1K_V2
    assert (default.spec.expected.hexdigest, default.spec.expected.prefix) == ("11ad3fa6", True)
    assert v1.final == hub / "resnet50-0676ba61.pth"
    assert not effnet.spec.expected.prefix and len(effnet.spec.expected.hexdigest) == 64  # a full sha256 known
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (plan,) = _plan(["torchvision:vit_b_16"])
    assert plan.final.parent == tmp_path / "xdg" / "torch" / "hub" / "checkpoints"
    # Planning (and a get's whole flow) never imports torch: checked in a fresh process, as this
    # one may have imported it for another test.
    code = ("import sys\nfrom prefetch.flow.planning import plan_request\nfrom prefetch.flow.request import GetRequest\n"
            "plan_request(GetRequest(names=['torchvision:resnet50', 'torchvision:CIFAR10']))\n"
            "print(sorted(m for m in ('torch', 'torchvision') if m in sys.modules))")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_unknown_and_not_covered_names_are_usage_errors(home, cli):
    from prefetch.errors import UnknownDatasetError

    with pytest.raises(UnknownDatasetError, match="Google Drive"):
        _plan(["torchvision:CelebA"])
    with pytest.raises(UnknownDatasetError, match="no weights 'IMAGENET9K'"):
        _plan(["torchvision:resnet50.IMAGENET9K"])
    with pytest.raises(UnknownDatasetError, match="no split 'nope'; its splits: extra, test, train"):
        _plan(["torchvision:SVHN.nope"])
    got = cli("get", "torchvision:Cifar11")
    assert got.returncode == 2 and "torchvision:CIFAR10" in got.stderr, got.stderr
    assert cli("get", "mnist", "--root", "x").returncode == 2
    assert cli("get", "mnist", "--torch-hub").returncode == 2


def test_splits_and_the_default_root(home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plans = _plan(["torchvision:SVHN.test", "torchvision:QMNIST.nist"])
    assert [p.final for p in plans] == [tmp_path / "data" / "test_32x32.mat",
                                        tmp_path / "data/QMNIST/raw/xnist-images-idx3-ubyte.xz",
                                        tmp_path / "data/QMNIST/raw/xnist-labels-idx2-int.xz"]
    assert plans[1].decompress_to == (tmp_path / "data/QMNIST/raw/xnist-images-idx3-ubyte",)


@pytest.mark.parametrize("body, message", [
    ('[[torchvision.X.files]]\nurls = ["http://127.0.0.1:9/x.bin"]\ncolour = "red"\n', "unknown key(s) colour"),
    ('[[torchvision.X.files]]\nurls = ["http://127.0.0.1:9/x.bin"]\ndecompress = true\n', "for .gz and .xz files"),
    ('[[torchvision.X.files]]\nurls = ["http://127.0.0.1:9/x.bin"]\ndir = "../up"\n', "inside root"),
    ('[[torchvision.X.files]]\nurls = ["http://127.0.0.1:9/x.bin"]\nmd5 = "abc"\n', "md5"),
    ('[[torchvision.X.files]]\nurls = []\n', "non-empty list"),
])
def test_a_bad_user_entry_is_refused_before_anything_starts(home, tmp_path, cli, body, message):
    registry = tmp_path / "bad.toml"
    registry.write_text("[torchvision.X]\n" + body)
    got = cli("get", "torchvision:X", "--root", str(tmp_path / "data"), "--registry", str(registry), "-b")
    assert got.returncode == 2 and message in got.stderr, got.stderr
    assert "started job" not in got.stdout
    assert not (tmp_path / "data").exists()
