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


def _plan(names, **fields):
    from prefetch.flow.planning import plan_request
    from prefetch.flow.request import GetRequest

    plans, _ = plan_request(GetRequest(names=list(names), **fields))
    return plans


def test_years_versions_and_splits_plan_what_the_class_downloads(home, tmp_path, monkeypatch):
    import pytest

    from prefetch.errors import UnknownDatasetError

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    (voc,) = _plan(["torchvision:VOCDetection"])  # the class's default year only
    assert voc.final == data / "VOCtrainval_11-May-2012.tar" and voc.extract_into == (data,)
    (v2008,) = _plan(["torchvision:VOCSegmentation.2008"])
    assert v2008.final == data / "VOCtrainval_11-May-2012.tar" and v2008.spec.name == "VOCtrainval_14-Jul-2008.tar"
    assert v2008.spec.expected.hexdigest == "2629fa636546599198acfcfbfcf1904a"
    assert [p.final.name for p in _plan(["torchvision:Places365.val"])] == ["filelist_places365-standard.tar",
                                                                             "val_large.tar"]
    assert [p.final.name for p in _plan(["torchvision:Places365.train-challenge-small"])] == [
        "filelist_places365-challenge.tar", "train_256_places365challenge.tar"]
    (inat,) = _plan(["torchvision:INaturalist"])
    assert inat.final == data / "2021_train.tgz" and inat.extract_moves == (("train", "2021_train"),)
    (emnist,) = _plan(["torchvision:EMNIST"])
    assert emnist.extract_into == (data / "EMNIST" / "raw",) and emnist.extract_gunzip == "gzip"
    assert len(_plan(["torchvision:Kitti"])) == 2 and len(_plan(["torchvision:SBDataset"])) == 2
    with pytest.raises(UnknownDatasetError, match="no split '2013'; its splits: 2007, 2007-test, 2008"):
        _plan(["torchvision:VOCSegmentation.2013"])
    with pytest.raises(UnknownDatasetError, match="LFW is no longer available for automatic download"):
        _plan(["torchvision:LFWPeople"])


def test_bad_rearranging_keys_are_refused(home, tmp_path, cli):
    base = '[[torchvision.X.files]]\nurls = ["http://127.0.0.1:9/x.tar"]\n'
    for body, message in [
        (base + 'extract = [""]\nmoves = {"../a" = "b"}\n', "relative path inside the archive"),
        (base + 'extract = [""]\nmoves = {"a" = "/b"}\n', "relative path inside the archive"),
        (base + 'moves = {"a" = "b"}\n', "apply to an archive that is extracted"),
        (base + 'save_as = "../x.tar"\n', "save_as must be a plain file name"),
        (base + 'split = []\n', "split must be a name or a list"),
        ('default_splits = ["b"]\n' + base + 'split = "a"\n', "default_splits must list splits"),
    ]:
        registry = tmp_path / "bad.toml"
        registry.write_text("[torchvision.X]\n" + body)
        got = cli("get", "torchvision:X", "--root", str(tmp_path / "data"), "--registry", str(registry))
        assert got.returncode == 2 and message in got.stderr, (body, got.stderr)


def test_merging_never_goes_through_a_planted_link_and_moves_refuse_links(tmp_path):
    import pytest

    from prefetch.archive.extract import extract_archive
    from prefetch.errors import IntegrityError

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    dest = tmp_path / "root"
    (dest / "VOCdevkit" / "VOC2012").mkdir(parents=True)
    (dest / "VOCdevkit" / "VOC2012" / "old.txt").write_text("old")
    (dest / "VOCdevkit" / "VOC2007").symlink_to(victim)
    archive = tmp_path / "a.tar"
    archive.write_bytes(scenes.tar({"VOCdevkit/VOC2007/new.txt": b"new", "VOCdevkit/VOC2012/two.txt": b"2"}, mode="w"))
    extract_archive(archive, dest, merge=True)
    assert sorted(p.name for p in (dest / "VOCdevkit" / "VOC2012").iterdir()) == ["old.txt", "two.txt"]
    assert not (dest / "VOCdevkit" / "VOC2007").is_symlink()  # replaced, not followed
    assert sorted(p.name for p in (dest / "VOCdevkit" / "VOC2007").iterdir()) == ["new.txt"]
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]

    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as out:
        (d := tarfile.TarInfo("inside")).type = tarfile.DIRTYPE
        out.addfile(d)
        link = tarfile.TarInfo("via")
        link.type, link.linkname = tarfile.SYMTYPE, "inside"
        out.addfile(link)
        out.addfile(tarfile.TarInfo("inside/x"), io.BytesIO(b""))
    archive.write_bytes(buf.getvalue())
    with pytest.raises(IntegrityError, match="not a directory"):
        extract_archive(archive, tmp_path / "other", moves=[("via/x", "x")])
    assert not (tmp_path / "other").exists() or not any((tmp_path / "other").iterdir())


def test_two_files_torchvision_saves_under_one_name_are_refused_together(home, tmp_path):
    import pytest

    from prefetch.errors import UsageError

    with pytest.raises(UsageError, match="both saved as .*VOCtrainval_11-May-2012.tar.*two commands"):
        _plan(["torchvision:VOCSegmentation.2012", "torchvision:VOCDetection.2008"], root=str(tmp_path))
    # The same file asked for twice (both VOC classes, one year) is planned once.
    assert len(_plan(["torchvision:VOCSegmentation", "torchvision:VOCDetection"], root=str(tmp_path))) == 1


def test_an_archive_without_what_the_class_renames_places_nothing(nginx_origin, home, tmp_path):
    from tests.torchvision_synth import CLOSED

    wrong = scenes.tar({"elsewhere/a.jpg": scenes.jpeg(1)})
    (nginx_origin.root / "val.tar.gz").write_bytes(wrong)
    registry = tmp_path / "inat.toml"
    registry.write_text(f'[torchvision.INaturalist]\n[[torchvision.INaturalist.files]]\nurls = ["{CLOSED}val.tar.gz"]\n'
                        f'md5 = "{md5(wrong)}"\nsave_as = "2021_valid.tgz"\nextract = [""]\n'
                        'moves = {"val" = "2021_valid"}\nsplit = "2021_valid"\n')
    root = tmp_path / "data"
    got = run_cli("get", "torchvision:INaturalist.2021_valid", "--root", str(root), "--registry", str(registry),
                  "--mirror", nginx_origin.url)
    assert got.returncode == 4 and "holds no 'val' to move to '2021_valid'" in got.stderr, got.stderr
    assert sorted(p.name for p in root.iterdir() if not p.name.endswith((".part", ".part.json"))) == []
