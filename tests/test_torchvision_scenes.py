"""torchvision: names for the classes that rename, move, merge or decompress what they
extract (SUN397, VOC, SBD, Places365, Kitti, INaturalist, Food101, DTD, EMNIST): the real
classes construct and read a sample from what prefetch placed, offline.

The registry is the built-in table with only the URLs (a closed port) and md5s changed, so
the layouts under test are the shipped ones; nginx serves the synthetic files through
``--mirror``; the loader runs in a subprocess with every socket blocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from prefetch.cache.torchvision import DATASETS_FILE
from tests import torchvision_synth_scenes as scenes
from tests.conftest import run_cli
from tests.torchvision_synth import md5


def test_the_classes_that_rearrange_what_they_extract_load_offline(nginx_origin, home, tmp_path):
    files = scenes.served_files()
    for name, data in files.items():
        (nginx_origin.root / name).write_bytes(data)
    registry = tmp_path / "scenes.toml"
    registry.write_text(scenes.registry_text(DATASETS_FILE.read_text(encoding="utf-8"), files))
    root, root_2008 = tmp_path / "data", tmp_path / "data-2008"

    def get(*names, into=root):
        got = run_cli("get", *names, "--root", str(into), "--registry", str(registry), "--mirror",
                      nginx_origin.url, "--json")
        assert got.returncode == 0, got.stderr
        return {r["path"] for r in json.loads(got.stdout)}

    # VOCSegmentation without a year is 2012, the class's default; VOCDetection.2007 then
    # extracts into the same VOCdevkit/ (merged, as tar does: VOC2012 stays).
    placed = get("torchvision:SUN397", "torchvision:VOCSegmentation", "torchvision:SBDataset",
                 "torchvision:Places365.val-small", "torchvision:Kitti", "torchvision:INaturalist.2021_valid",
                 "torchvision:Food101", "torchvision:DTD", "torchvision:EMNIST")
    assert str(root / "VOCtrainval_11-May-2012.tar") in placed
    assert str(root / "2021_valid.tgz") in placed  # saved under the class's filename=, not the URL's
    get("torchvision:VOCDetection.2007", "torchvision:Places365.train-standard-small")
    get("torchvision:VOCSegmentation.2008", into=root_2008)

    assert sorted(p.name for p in (root / "VOCdevkit").iterdir()) == ["VOC2007", "VOC2012"]
    assert (root_2008 / "VOCtrainval_11-May-2012.tar").read_bytes() == files["VOCtrainval_14-Jul-2008.tar"]
    assert (root / "2021_valid").is_dir() and not (root / "val").exists()
    assert (root / "data_256_standard" / "a" / "abbey").is_dir() and not (root / "data_256").exists()
    assert {p.name for p in (root / "Kitti" / "raw" / "training").iterdir()} == {"image_2", "label_2"}
    for moved in ("cls", "img", "inst", "train.txt", "val.txt"):
        assert (root / moved).exists() and not (root / "benchmark_RELEASE" / "dataset" / moved).exists()
    assert (root / "benchmark_RELEASE" / "README").exists()
    raw = root / "EMNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(
        ["gzip.zip"] + [f"emnist-balanced-{s}-{k}" for s in ("train", "test")
                        for k in ("images-idx3-ubyte", "labels-idx1-ubyte")])
    assert (root / "dtd" / "dtd-r1.0.1.tar.gz").exists() and (root / "dtd" / "dtd" / "labels").is_dir()

    md5s = {n: md5(d) for n, d in {**files, **scenes.PLACES_LISTS}.items()}
    script = tmp_path / "load_scenes.py"
    script.write_text(scenes.LOADER)
    proc = subprocess.run([sys.executable, str(script), str(root), str(root_2008), json.dumps(md5s)],
                          capture_output=True, text=True, timeout=280, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for download in (False, True):
        assert out[f"SUN397/{download}"][:2] == [2, [8, 8]] and out[f"SUN397/{download}"][2] in (0, 1), out
        assert out[f"VOCSegmentation/2012/{download}"] == [1, [8, 8], "PngImageFile"]
        assert out[f"VOCDetection/2012/{download}"] == [1, [8, 8], "dict"]
        assert out[f"VOCDetection/2007/{download}"] == [1, [8, 8], "dict"]
        assert out[f"VOCSegmentation/2008/{download}"] == [1, [8, 8], "PngImageFile"]
        assert out[f"Places365/val/{download}"] == [1, [8, 8], 1]
        assert out[f"Places365/train-standard/{download}"] == [2, [8, 8], 0]
        assert out[f"Kitti/True/{download}"] == [1, [8, 8], "list"]
        assert out[f"Kitti/False/{download}"] == [1, [8, 8], None]
        assert out[f"INaturalist/{download}"][:2] == [2, [8, 8]]
        assert out[f"Food101/{download}"] == [1, [8, 8], 0]
        assert out[f"DTD/{download}"] == [1, [8, 8], 0]
        assert out[f"EMNIST/True/{download}"] == [scenes.EMNIST_ROWS[0], [scenes.EMNIST_ROWS[0], 28, 28]]
        assert out[f"EMNIST/False/{download}"] == [scenes.EMNIST_ROWS[1], [scenes.EMNIST_ROWS[1], 28, 28]]
    assert out["SBDataset/train"] == [1, [8, 8], "Image"]
    assert out["SBDataset/train_noval"] == [1, [8, 8], "Image"]
    assert out["VOCDetection/2007/object"] == "cat"
    assert out["Kitti/label"] == "Car"
