"""GTSRB, CLEVRClassification, OxfordIIITPet, Country211, FGVCAircraft, EuroSAT, RenderedSST2,
Flowers102, Imagenette, PhotoTour and Middlebury2014Stereo end to end: the real torchvision
classes construct, offline, from what ``prefetch get torchvision:<Class>`` placed.

Synthetic files (tests/torchvision_synth_b.py) are served by a real nginx through ``--mirror``;
the registry copies the built-in layout with the synthetic md5s and URLs on a closed port.
The classes run in a subprocess whose sockets are blocked and whose downloaders raise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from prefetch.archive.extract import extract_archive
from prefetch.cache.torchvision import load_tables
from prefetch.errors import IntegrityError, RegistryError, UnknownDatasetError
from prefetch.flow.planners.torchvision import plan_dataset
from tests import torchvision_synth_b as synth
from tests.conftest import run_cli

NAMES = ["torchvision:GTSRB.test", "torchvision:CLEVRClassification", "torchvision:OxfordIIITPet",
         "torchvision:Country211", "torchvision:FGVCAircraft", "torchvision:EuroSAT", "torchvision:RenderedSST2",
         "torchvision:Flowers102", "torchvision:Imagenette.160px", f"torchvision:PhotoTour.{synth.PHOTOTOUR_NAME}",
         "torchvision:Middlebury2014Stereo.train", "torchvision:Middlebury2014Stereo.test"]


def _requests(nginx) -> int:
    return len(nginx.timings()) if nginx.timing_log.exists() else 0


def _load(root: Path, md5s: dict, tmp_path: Path) -> dict:
    script = tmp_path / "load_torchvision_b.py"
    script.write_text(synth.LOADER)
    proc = subprocess.run([sys.executable, str(script), str(root), json.dumps(md5s), synth.pack_wanted()], check=False,
                          capture_output=True, text=True, timeout=280, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_classes_construct_from_what_prefetch_placed(nginx_origin, home, tmp_path):
    classes = synth.all_classes()
    served = {name: data for files in classes.values() for name, data in files.items()}
    assert len(served) == sum(len(f) for f in classes.values())  # one flat mirror: names are unique
    for name, data in served.items():
        (nginx_origin.root / name).write_bytes(data)
    registry = tmp_path / "torchvision-synth-b.toml"
    registry.write_text(synth.registry_text(classes))
    root = tmp_path / "data"
    common = ("--root", str(root), "--registry", str(registry), "--mirror", nginx_origin.url)

    # GTSRB's train split first, then its test split: both zips hold GTSRB/, merged, not replaced.
    got = run_cli("get", "torchvision:GTSRB.train", *common)
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in (root / "gtsrb").iterdir()) == ["GTSRB", "GTSRB-Training_fixed.zip"]
    got = run_cli("get", *NAMES, *common, "--json", timeout=240)
    assert got.returncode == 0, got.stderr
    records = json.loads(got.stdout)
    assert {r["status"] for r in records} == {"downloaded"}, records
    assert len(records) == len(served) - 1

    # The layout each class checks, archives kept beside what they extracted into.
    gtsrb = root / "gtsrb"
    assert sorted(p.name for p in gtsrb.iterdir()) == ["GT-final_test.csv", "GTSRB", "GTSRB-Training_fixed.zip",
                                                       "GTSRB_Final_Test_GT.zip", "GTSRB_Final_Test_Images.zip"]
    assert sorted(p.name for p in (gtsrb / "GTSRB").iterdir()) == ["Final_Test", "Training"]
    assert sorted(p.name for p in (root / "clevr").iterdir()) == ["CLEVR_v1.0", "CLEVR_v1.0.zip"]
    assert sorted(p.name for p in (root / "oxford-iiit-pet").iterdir()) == [
        "annotations", "annotations.tar.gz", "images", "images.tar.gz"]
    assert sorted(p.name for p in (root / "eurosat").iterdir()) == ["2750", "EuroSAT.zip"]
    assert sorted(p.name for p in (root / "flowers-102").iterdir()) == [
        "102flowers.tgz", "imagelabels.mat", "jpg", "setid.mat"]
    assert (root / "flowers-102" / "setid.mat").read_bytes() == served["setid.mat"]
    assert sorted(p.name for p in (root / synth.PHOTOTOUR_NAME).iterdir()) == [
        "info.txt", "m50_100000_100000_0.txt", "patches0000.bmp"]
    middlebury = root / "Middlebury2014" / "train"
    assert len([p for p in middlebury.iterdir() if p.is_dir()]) == 20
    assert (middlebury / "Adirondack-imperfect" / "disp1.pfm").is_file()
    # The test split: only MiddEval3/testF's scenes, moved into test/ (the class drops the rest).
    assert sorted(p.name for p in (root / "Middlebury2014").iterdir()) == ["MiddEval3-data-F.zip", "test", "train"]
    assert sorted(p.name for p in (root / "Middlebury2014" / "test").iterdir()) == sorted(
        __import__("torchvision").datasets.Middlebury2014Stereo.splits["test"])
    top = sorted(p.name for p in root.iterdir())
    assert top == sorted(["Middlebury2014", "clevr", "country211", "country211.tgz", "eurosat", "fgvc-aircraft-2013b",
                          "fgvc-aircraft-2013b.tar.gz", "flowers-102", "gtsrb", "imagenette2-160",
                          "imagenette2-160.tgz", "notredame_harris", "notredame_harris.zip", "oxford-iiit-pet",
                          "rendered-sst2", "rendered-sst2.tgz"]), top

    before = _requests(nginx_origin)
    out = _load(root, {"Flowers102": {n: synth.md5(d) for n, d in classes["Flowers102"].items()}}, tmp_path)
    for cls, variants in synth.VARIANTS.items():
        for label, (_, length) in variants.items():
            for download in (False, True):
                if download and (cls, label) in synth.NO_DOWNLOAD_TRUE:
                    continue
                got = out[f"{cls}/{label}/{download}"]
                assert got[0] == length, (cls, label, download, got)
    assert out["Middlebury2014Stereo/train/False"][1:] == ["tuple", 4]  # images, disparity, valid mask
    assert out["PhotoTour/test/False"][1:] == ["tuple", 3]  # two patches and whether they match
    assert out["OxfordIIITPet/trainval/False"][1:] == ["tuple", 2]
    assert out["Middlebury2014Stereo/test/True"] == "FileExistsError"  # torchvision's own, see NO_DOWNLOAD_TRUE

    # A second get finds everything in place: nothing is requested again.
    again = run_cli("get", "torchvision:GTSRB", *NAMES, *common, "--json", timeout=240)
    assert again.returncode == 0, again.stderr
    assert {r["status"] for r in json.loads(again.stdout)} == {"cached"}
    assert _requests(nginx_origin) == before


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_subfolder_extracts_only_that_folder_and_a_missing_one_places_nothing(tmp_path):
    archive = _zip(tmp_path / "m.zip", {"Eval/testF/s1/im0.png": b"1", "Eval/testF/s2/im0.png": b"2",
                                        "Eval/trainingF/t/im0.png": b"t", "readme": b"r"})
    got = extract_archive(archive, tmp_path / "out" / "test", subfolder="Eval/testF")
    assert got.entries == ["s1", "s2"]
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file()) == [
        "test/s1/im0.png", "test/s2/im0.png"]
    with pytest.raises(IntegrityError, match="no folder 'Eval/nope'"):
        extract_archive(archive, tmp_path / "none", subfolder="Eval/nope")
    with pytest.raises(IntegrityError, match="no folder 'readme'"):  # a file is not a folder
        extract_archive(archive, tmp_path / "none", subfolder="readme")
    assert not (tmp_path / "none").exists()
    assert not [p for p in tmp_path.rglob(".*") if ".extract-" in p.name]


def test_splits_pick_their_files_and_extract_from_is_checked(tmp_path):
    tables = load_tables()

    def names(cls, split=None):
        return sorted(p.final.name for p in plan_dataset(tables.datasets[cls], root=tmp_path, keras_root=tmp_path,
                                                         keras_registry=None, split=split))

    assert names("Imagenette", "320px") == ["imagenette2-320.tgz"]
    assert names("GTSRB", "test") == ["GTSRB_Final_Test_GT.zip", "GTSRB_Final_Test_Images.zip"]
    assert names("PhotoTour", "liberty") == ["liberty.zip"]
    assert len(names("Middlebury2014Stereo", "additional")) == 26 and len(names("Middlebury2014Stereo")) == 47
    plan = plan_dataset(tables.datasets["PhotoTour"], root=tmp_path, keras_root=tmp_path, keras_registry=None,
                        split="yosemite")[0]
    assert plan.final == tmp_path / "yosemite.zip" and plan.extract_into == (tmp_path / "yosemite",)
    assert [p.extract_merge for p in plan_dataset(tables.datasets["GTSRB"], root=tmp_path, keras_root=tmp_path,
                                                  keras_registry=None)] == [True] * 3
    test = plan_dataset(tables.datasets["Middlebury2014Stereo"], root=tmp_path, keras_root=tmp_path,
                        keras_registry=None, split="test")
    assert [(p.final, p.extract_into, p.extract_subfolder) for p in test] == [
        (tmp_path / "Middlebury2014" / "MiddEval3-data-F.zip", (tmp_path / "Middlebury2014" / "test",), "MiddEval3/testF")]
    with pytest.raises(UnknownDatasetError, match="additional, test, train"):
        plan_dataset(tables.datasets["Middlebury2014Stereo"], root=tmp_path, keras_root=tmp_path, keras_registry=None,
                     split="nope")
    bad = tmp_path / "bad.toml"
    bad.write_text('[torchvision.X]\n[[torchvision.X.files]]\nurls = ["https://example.org/x.bin"]\n'
                   'extract_from = "a"\n')
    with pytest.raises(RegistryError, match="extract_from"):  # not an extracted archive
        load_tables(extra_files=[bad])
    bad.write_text('[torchvision.X]\n[[torchvision.X.files]]\nurls = ["https://example.org/x.zip"]\n'
                   'extract = [""]\nextract_from = "../up"\n')
    with pytest.raises(RegistryError, match="extract_from"):
        load_tables(extra_files=[bad])


def test_a_merge_never_replaces_the_archive_in_a_folder_it_enters(tmp_path):
    from prefetch.errors import UnsafeArchiveError

    into = tmp_path / "root"
    (into / "keep").mkdir(parents=True)
    archive = _zip(into / "keep" / "a.zip", {"keep/a.zip": b"not the archive", "keep/new.txt": b"n"})
    data = archive.read_bytes()
    with pytest.raises(UnsafeArchiveError, match="would replace"):
        extract_archive(archive, into, merge=True)
    assert archive.read_bytes() == data and sorted(p.name for p in (into / "keep").iterdir()) == ["a.zip"]
