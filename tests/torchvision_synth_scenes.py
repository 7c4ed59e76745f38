"""Synthetic archives for the torchvision classes whose files are archives of images, lists,
.mat and xml annotations (SUN397, VOC, SBD, Places365, Kitti, INaturalist, Food101, DTD,
EMNIST), a registry that keeps the built-in table's layout for them (only the URLs, on a
closed port, and the md5s change), and the loader that reads them with the real classes.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
import textwrap
import zipfile

import numpy as np

from tests.datasets_synth import _idx_images, _idx_labels
from tests.torchvision_synth import CLOSED, NO_NETWORK, md5

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def jpeg(seed: int) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)).save(out, format="JPEG")
    return out.getvalue()


def png_mask() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.eye(8, dtype=np.uint8)).save(out, format="PNG")
    return out.getvalue()


def sbd_mat() -> bytes:
    from scipy.io import savemat

    out = io.BytesIO()
    savemat(out, {"GTcls": {"Segmentation": np.eye(6, dtype=np.uint8)}})
    return out.getvalue()


def tar(members: dict[str, bytes], *, mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as out:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            out.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_of(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for name, data in members.items():
            out.writestr(name, data)
    return buf.getvalue()


def _voc(year: str) -> dict[str, bytes]:
    base = "TrainVal/VOCdevkit/VOC2011" if year == "2011" else f"VOCdevkit/VOC{year[:4]}"
    xml = (f"<annotation><filename>{year}_1.jpg</filename><object><name>cat</name>"
           "<bndbox><xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>")
    image_set = "test" if year.endswith("test") else "train"
    return {f"{base}/ImageSets/Segmentation/{image_set}.txt": f"{year}_1\n".encode(),
            f"{base}/ImageSets/Main/{image_set}.txt": f"{year}_1\n".encode(),
            f"{base}/JPEGImages/{year}_1.jpg": jpeg(1),
            f"{base}/SegmentationClass/{year}_1.png": png_mask(),
            f"{base}/Annotations/{year}_1.xml": xml.encode()}


# The members of Places365's devkit; the class md5-checks each of them.
PLACES_LISTS = {"categories_places365.txt": b"/a/abbey 0\n/b/bakery 1\n",
                "places365_train_standard.txt": b"/a/abbey/00000001.jpg 0\n/b/bakery/00000001.jpg 1\n",
                "places365_val.txt": b"Places365_val_00000001.jpg 1\n",
                "places365_test.txt": b"Places365_test_00000001.jpg\n"}


def served_files() -> dict[str, bytes]:
    """Every synthetic file, by the name a flat mirror serves it under."""
    inat = "00000_Animalia_Chordata_Aves_Passeriformes_Corvidae_Corvus_corax"
    places_lists = PLACES_LISTS
    sbd = "benchmark_RELEASE/dataset"
    return {
        "SUN397.tar.gz": tar({"SUN397/ClassName.txt": b"/a/abbey\n/b/bakery\n",
                              "SUN397/a/abbey/sun_aaa.jpg": jpeg(2), "SUN397/b/bakery/sun_bbb.jpg": jpeg(3)}),
        "VOCtrainval_11-May-2012.tar": tar(_voc("2012"), mode="w"),
        "VOCtrainval_06-Nov-2007.tar": tar(_voc("2007"), mode="w"),
        "VOCtrainval_14-Jul-2008.tar": tar(_voc("2008"), mode="w"),
        "benchmark.tgz": tar({f"{sbd}/img/2008_1.jpg": jpeg(4), f"{sbd}/cls/2008_1.mat": sbd_mat(),
                              f"{sbd}/inst/2008_1.mat": sbd_mat(), f"{sbd}/train.txt": b"2008_1\n",
                              f"{sbd}/val.txt": b"2008_1\n", "benchmark_RELEASE/README": b"synthetic\n"}),
        "train_noval.txt": b"2008_1\n",
        "filelist_places365-standard.tar": tar(places_lists, mode="w"),
        "val_256.tar": tar({"val_256/Places365_val_00000001.jpg": jpeg(5)}, mode="w"),
        "train_256_places365standard.tar": tar({"data_256/a/abbey/00000001.jpg": jpeg(6),
                                                "data_256/b/bakery/00000001.jpg": jpeg(7)}, mode="w"),
        "data_object_image_2.zip": zip_of({"training/image_2/000000.png": png_mask(),
                                           "testing/image_2/000000.png": png_mask()}),
        "data_object_label_2.zip": zip_of({"training/label_2/000000.txt":
                                           b"Car 0.00 0 -1.58 587.01 173.33 614.12 200.12 1.65 1.67 3.64 -0.65 1.71 46.70 -1.59\n"}),
        "val.tar.gz": tar({f"val/{inat}/a.jpg": jpeg(8), f"val/{inat}/b.jpg": jpeg(9)}),
        "food-101.tar.gz": tar({"food-101/meta/train.json": json.dumps({"apple_pie": ["apple_pie/1"]}).encode(),
                                "food-101/meta/test.json": json.dumps({"apple_pie": ["apple_pie/2"]}).encode(),
                                "food-101/images/apple_pie/1.jpg": jpeg(10),
                                "food-101/images/apple_pie/2.jpg": jpeg(11)}),
        "dtd-r1.0.1.tar.gz": tar({"dtd/labels/train1.txt": b"banded/banded_0001.jpg\n",
                                  "dtd/images/banded/banded_0001.jpg": jpeg(12)}),
        "gzip.zip": zip_of(_emnist()),
    }


EMNIST_ROWS = (4, 2)


def _emnist() -> dict[str, bytes]:
    rng = np.random.default_rng(7)
    members = {"gzip/emnist-balanced-mapping.txt": b"0 48\n"}
    for part, rows in zip(("train", "test"), EMNIST_ROWS):
        members[f"gzip/emnist-balanced-{part}-images-idx3-ubyte.gz"] = _idx_images(rng.integers(0, 256, (rows, 28, 28)))
        members[f"gzip/emnist-balanced-{part}-labels-idx1-ubyte.gz"] = _idx_labels(rng.integers(0, 10, rows))
    return members


CLASSES = ("SUN397", "VOCSegmentation", "VOCDetection", "SBDataset", "Places365", "Kitti", "INaturalist",
           "Food101", "DTD", "EMNIST")


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_value(x)}" for k, x in v.items()) + "}"


def registry_text(table_text: str, files: dict[str, bytes]) -> str:
    """``[torchvision.<Class>]`` for CLASSES: the built-in entries (``table_text``, the shipped
    torchvision.toml) with every URL on a closed port and the served files' md5s."""
    table = tomllib.loads(table_text)["datasets"]
    lines = ["# the built-in layouts, synthetic bytes (tests/torchvision_synth_scenes.py)"]
    for cls in CLASSES:
        body = table[cls]
        lines += ["", f"[torchvision.{cls}]"]
        lines += [f"{k} = {_value(body[k])}" for k in ("description", "default_splits") if k in body]
        for f in body["files"]:
            name = f.get("name") or f["urls"][0].rsplit("/", 1)[1]
            entry = dict(f, name=name, urls=[CLOSED + name])
            if name in files:
                entry["md5"] = md5(files[name])
            lines.append(f"[[torchvision.{cls}.files]]")
            lines += [f"{k} = {_value(v)}" for k, v in entry.items()]
    return "\n".join(lines) + "\n"


# Runs in a subprocess: every socket blocked; torchvision's md5 tables patched to the
# synthetic files' (argv[3]); prints what each class read.
LOADER = NO_NETWORK + textwrap.dedent(
    """

    import torchvision.datasets as D
    from torchvision.datasets import inaturalist, voc

    root, root_2008, md5s = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    D.SUN397._DATASET_MD5 = md5s["SUN397.tar.gz"]
    for year, name in (("2012", "VOCtrainval_11-May-2012.tar"), ("2007", "VOCtrainval_06-Nov-2007.tar"),
                       ("2008", "VOCtrainval_14-Jul-2008.tar")):
        voc.DATASET_YEAR_DICT[year]["md5"] = md5s[name]
    P = D.Places365
    P._CATEGORIES_META = (P._CATEGORIES_META[0], md5s["categories_places365.txt"])
    P._FILE_LIST_META = {k: (n, md5s.get(n, m)) for k, (n, m) in P._FILE_LIST_META.items()}
    inaturalist.DATASET_MD5["2021_valid"] = md5s["val.tar.gz"]
    D.Food101._MD5 = md5s["food-101.tar.gz"]
    D.DTD._MD5 = md5s["dtd-r1.0.1.tar.gz"]

    def read(ds):
        image, target = ds[0]
        return [len(ds), list(image.size), target if isinstance(target, (int, type(None))) else type(target).__name__]

    out = {}
    for download in (False, True):
        out[f"SUN397/{download}"] = read(D.SUN397(root, download=download))
        out[f"VOCSegmentation/2012/{download}"] = read(D.VOCSegmentation(root, year="2012", download=download))
        out[f"VOCDetection/2012/{download}"] = read(D.VOCDetection(root, year="2012", download=download))
        out[f"VOCDetection/2007/{download}"] = read(D.VOCDetection(root, year="2007", download=download))
        out[f"VOCSegmentation/2008/{download}"] = read(D.VOCSegmentation(root_2008, year="2008", download=download))
        for split in ("val", "train-standard"):
            out[f"Places365/{split}/{download}"] = read(D.Places365(root, split=split, small=True, download=download))
        for train in (True, False):
            out[f"Kitti/{train}/{download}"] = read(D.Kitti(root, train=train, download=download))
        out[f"INaturalist/{download}"] = read(D.INaturalist(root, version="2021_valid", download=download))
        out[f"Food101/{download}"] = read(D.Food101(root, split="train", download=download))
        out[f"DTD/{download}"] = read(D.DTD(root, split="train", download=download))
        for train in (True, False):
            ds = D.EMNIST(root, split="balanced", train=train, download=download)
            out[f"EMNIST/{train}/{download}"] = [len(ds), list(ds.data.shape)]
    # SBDataset(download=True) extracts and moves again, and its own shutil.move refuses the
    # folders already in root: torchvision's behaviour, so only download=False is read.
    for image_set in ("train", "train_noval"):
        ds = D.SBDataset(root, image_set=image_set, mode="segmentation", download=False)
        out[f"SBDataset/{image_set}"] = read(ds)
    vdet = D.VOCDetection(root, year="2007")[0][1]
    out["VOCDetection/2007/object"] = vdet["annotation"]["object"][0]["name"]
    out["Kitti/label"] = D.Kitti(root)[0][1][0]["type"]
    print(json.dumps(out))
    """
)
