"""Synthetic files for GTSRB, CLEVRClassification, OxfordIIITPet, Country211, FGVCAircraft,
EuroSAT, RenderedSST2, Flowers102, Imagenette, PhotoTour and Middlebury2014Stereo.

Each archive has the real file name and the folder layout the class reads (csv, json, txt
lists, .mat, ppm/jpg/png/bmp images, pfm disparities), with a few tiny images. The registry
written for them copies the built-in table's layout (dir, extract, extract_from, split) and gives
the synthetic files' own md5s; the loader patches torchvision's md5 tables, in its own
process only, where a class checks them on construction (Flowers102's .mat files).
"""

from __future__ import annotations

import io
import json
import textwrap
import zipfile

import numpy as np

from prefetch.cache.torchvision import load_tables
from tests.archives import tar_gz
from tests.torchvision_synth import CLOSED, NO_NETWORK, md5


def image(fmt: str, size: tuple[int, int] = (8, 6), mode: str = "RGB", seed: int = 0) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    shape = (size[1], size[0]) if mode == "L" else (size[1], size[0], 3)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, size=shape, dtype=np.uint8), mode).save(out, format=fmt)
    return out.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def tgz(members: dict[str, bytes]) -> bytes:
    return tar_gz(members)


def pfm(values: np.ndarray) -> bytes:
    """A one-channel little-endian PFM, as torchvision's _read_pfm reads it."""
    h, w = values.shape
    return b"Pf\n" + f"{w} {h}\n".encode() + b"-1.0\n" + values.astype("<f4").tobytes()


def _mat(**arrays) -> bytes:
    from scipy.io import savemat

    out = io.BytesIO()
    savemat(out, {k: np.asarray(v) for k, v in arrays.items()})
    return out.getvalue()


def gtsrb() -> dict[str, bytes]:
    train = {f"GTSRB/Training/{c:05d}/{i:05d}_00000.ppm": image("PPM", seed=c * 10 + i) for c in (0, 1) for i in (0, 1)}
    test = {f"GTSRB/Final_Test/Images/{i:05d}.ppm": image("PPM", seed=50 + i) for i in range(3)}
    csv = "Filename;Width;Height;Roi.X1;Roi.Y1;Roi.X2;Roi.Y2;ClassId\n" + "".join(
        f"{i:05d}.ppm;8;6;0;0;7;5;{i % 2}\n" for i in range(3))
    return {"GTSRB-Training_fixed.zip": zip_bytes(train), "GTSRB_Final_Test_Images.zip": zip_bytes(test),
            "GTSRB_Final_Test_GT.zip": zip_bytes({"GT-final_test.csv": csv.encode()})}


def clevr() -> dict[str, bytes]:
    members = {}
    for split, n in (("train", 3), ("val", 2), ("test", 2)):
        names = [f"CLEVR_{split}_{i:06d}.png" for i in range(n)]
        members.update({f"CLEVR_v1.0/images/{split}/{f}": image("PNG", seed=i) for i, f in enumerate(names)})
        if split != "test":
            scenes = {"scenes": [{"image_filename": f, "objects": [{}] * (i + 1)} for i, f in enumerate(names)]}
            members[f"CLEVR_v1.0/scenes/CLEVR_{split}_scenes.json"] = json.dumps(scenes).encode()
    return {"CLEVR_v1.0.zip": zip_bytes(members)}


def oxford_pet() -> dict[str, bytes]:
    ids = ["Abyssinian_1", "Abyssinian_2", "american_bulldog_1"]
    labels = {"Abyssinian_1": "1 1 1", "Abyssinian_2": "1 1 1", "american_bulldog_1": "2 2 1"}
    images = {f"images/{i}.jpg": image("JPEG", seed=n) for n, i in enumerate(ids)}
    anns = {"annotations/trainval.txt": "".join(f"{i} {labels[i]}\n" for i in ids[:2]).encode(),
            "annotations/test.txt": f"{ids[2]} {labels[ids[2]]}\n".encode(),
            **{f"annotations/trimaps/{i}.png": image("PNG", mode="L", seed=n) for n, i in enumerate(ids)}}
    return {"images.tar.gz": tgz(images), "annotations.tar.gz": tgz(anns)}


def country211() -> dict[str, bytes]:
    members = {f"country211/{split}/{cc}/{n}.jpg": image("JPEG", seed=n)
               for split in ("train", "valid", "test") for cc in ("AD", "AE") for n in (1, 2)}
    return {"country211.tgz": tgz(members)}


def fgvc_aircraft() -> dict[str, bytes]:
    d = "fgvc-aircraft-2013b/data"
    members = {f"{d}/variants.txt": b"707-320\nA300B4\n", f"{d}/families.txt": b"Boeing 707\nA300\n",
               f"{d}/manufacturers.txt": b"Boeing\nAirbus\n"}
    rows = {"0034309": ("707-320", "Boeing 707", "Boeing"), "0056978": ("A300B4", "A300", "Airbus")}
    for level, k in (("variant", 0), ("family", 1), ("manufacturer", 2)):
        for split in ("train", "val", "trainval", "test"):
            members[f"{d}/images_{level}_{split}.txt"] = "".join(f"{i} {v[k]}\n" for i, v in rows.items()).encode()
    members.update({f"{d}/images/{i}.jpg": image("JPEG", seed=n) for n, i in enumerate(rows)})
    return {"fgvc-aircraft-2013b.tar.gz": tgz(members)}


def eurosat() -> dict[str, bytes]:
    members = {f"2750/{c}/{c}_{n}.jpg": image("JPEG", seed=n) for c in ("AnnualCrop", "Forest") for n in (1, 2)}
    return {"EuroSAT.zip": zip_bytes(members)}


def rendered_sst2() -> dict[str, bytes]:
    members = {f"rendered-sst2/{split}/{c}/{n}.png": image("PNG", seed=n)
               for split in ("train", "valid", "test") for c in ("negative", "positive") for n in (0, 1)}
    return {"rendered-sst2.tgz": tgz(members)}


def flowers102() -> dict[str, bytes]:
    images = {f"jpg/image_{i:05d}.jpg": image("JPEG", seed=i) for i in range(1, 7)}
    return {"102flowers.tgz": tgz(images), "imagelabels.mat": _mat(labels=[[1, 2, 1, 2, 1, 2]]),
            "setid.mat": _mat(trnid=[[1, 2]], valid=[[3, 4]], tstid=[[5, 6]])}


def imagenette() -> dict[str, bytes]:
    members = {f"imagenette2-160/{split}/{wnid}/ILSVRC2012_{split}_{n}.JPEG": image("JPEG", seed=n)
               for split in ("train", "val") for wnid in ("n01440764", "n02102040") for n in (1, 2)}
    return {"imagenette2-160.tgz": tgz(members)}


PHOTOTOUR_NAME = "notredame_harris"


def phototour() -> dict[str, bytes]:
    """One 128x128 bmp (four 64x64 patches), info.txt (patch -> 3D point), a matches file."""
    members = {"patches0000.bmp": image("BMP", size=(128, 128), mode="L", seed=7),
               "info.txt": b"0 0\n0 0\n1 0\n1 0\n",
               "m50_100000_100000_0.txt": b"0 0 0 1 0 0\n2 1 0 3 1 0\n0 0 0 2 1 0\n"}
    return {f"{PHOTOTOUR_NAME}.zip": zip_bytes(members)}


def middlebury(split: str = "train") -> dict[str, bytes]:
    """Every scene of ``split`` in both calibrations: a folder <scene>-<calibration>/ per zip."""
    from torchvision.datasets import Middlebury2014Stereo

    disp = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    out = {}
    for n, scene in enumerate(Middlebury2014Stereo.splits[split]):
        for cal in ("perfect", "imperfect"):
            folder = f"{scene}-{cal}"
            out[f"{folder}.zip"] = zip_bytes({f"{folder}/calib.txt": b"ndisp=64\n", f"{folder}/im0.png": image("PNG", seed=n),
                                              f"{folder}/im1.png": image("PNG", seed=n + 1),
                                              f"{folder}/disp0.pfm": pfm(disp), f"{folder}/disp1.pfm": pfm(disp + 1)})
    return out


def middlebury_test() -> dict[str, bytes]:
    """MiddEval3-data-F.zip: MiddEval3/testF/<scene>/ for every test scene, and a trainingF/ the
    class throws away."""
    from torchvision.datasets import Middlebury2014Stereo

    members = {"MiddEval3/trainingF/Adirondack/im0.png": image("PNG", seed=99)}
    for n, scene in enumerate(Middlebury2014Stereo.splits["test"]):
        members.update({f"MiddEval3/testF/{scene}/calib.txt": b"ndisp=64\n",
                        f"MiddEval3/testF/{scene}/im0.png": image("PNG", seed=n),
                        f"MiddEval3/testF/{scene}/im1.png": image("PNG", seed=n + 1)})
    return {"MiddEval3-data-F.zip": zip_bytes(members)}


def all_classes() -> dict[str, dict[str, bytes]]:
    return {"GTSRB": gtsrb(), "CLEVRClassification": clevr(), "OxfordIIITPet": oxford_pet(),
            "Country211": country211(), "FGVCAircraft": fgvc_aircraft(), "EuroSAT": eurosat(),
            "RenderedSST2": rendered_sst2(), "Flowers102": flowers102(), "Imagenette": imagenette(),
            "PhotoTour": phototour(), "Middlebury2014Stereo": {**middlebury(), **middlebury_test()}}


def registry_text(classes: dict[str, dict[str, bytes]]) -> str:
    """``[torchvision.<Class>]`` tables with the built-in layout of each file given (dir, extract,
    extract_from, split), URLs on a closed port and the synthetic md5 (none where the built-in has none)."""
    builtin = load_tables().datasets
    lines = ["# synthetic torchvision datasets (tests/torchvision_synth_b.py), laid out as the built-in table says"]
    for cls, files in classes.items():
        lines += ["", f"[torchvision.{cls}]", f'description = "synthetic {cls}"']
        for f in builtin[cls].files:
            if f.name not in files:
                continue
            lines += [f"[[torchvision.{cls}.files]]", f'name = "{f.name}"', f'urls = ["{CLOSED}{f.name}"]']
            if f.expected is not None:
                lines.append(f'md5 = "{md5(files[f.name])}"')
            if f.dir:
                lines.append(f'dir = "{f.dir}"')
            if f.extract:
                lines.append("extract = [" + ", ".join(f'"{e}"' for e in f.extract) + "]")
            if f.extract_from:
                lines.append(f'extract_from = "{f.extract_from}"')
            if f.split:
                lines.append(f'split = "{f.split}"')
    return "\n".join(lines) + "\n"


# Runs in a subprocess: blocks every socket, makes every torchvision downloader raise, patches
# Flowers102's md5s (its constructor checks the .mat files), then builds each class with
# download=False and download=True and reads a sample.
LOADER = NO_NETWORK + textwrap.dedent(
    """

    import importlib, pkgutil
    import torchvision.datasets as D
    import torchvision.datasets.utils as U

    def no_download(*args, **kwargs):
        raise AssertionError(f"torchvision tried to download {args!r}")

    for info in pkgutil.iter_modules(D.__path__):
        mod = importlib.import_module(f"torchvision.datasets.{info.name}")
        for name in ("download_url", "download_and_extract_archive", "_urlretrieve", "download_file_from_google_drive"):
            if hasattr(mod, name):
                setattr(mod, name, no_download)

    root, md5s, wanted = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    if "Flowers102" in md5s:
        D.Flowers102._file_dict = {k: (n, md5s["Flowers102"][n]) for k, (n, _) in D.Flowers102._file_dict.items()}

    def build(cls, kwargs, download):
        return getattr(D, cls)(root, download=download, **kwargs)

    out = {}
    for cls, variants in wanted.items():
        for label, (kwargs, downloads) in variants.items():
            for download in (False, True):
                if download not in downloads:
                    try:
                        build(cls, kwargs, download)
                    except Exception as exc:
                        out[f"{cls}/{label}/{download}"] = type(exc).__name__
                    continue
                ds = build(cls, kwargs, download)
                sample = ds[0]
                out[f"{cls}/{label}/{download}"] = [len(ds), type(sample).__name__, len(sample)]
    print(json.dumps(out))
    """
)

# What the loader builds: class -> label -> constructor arguments, and the length each must have.
VARIANTS = {
    "GTSRB": {"train": ({"split": "train"}, 4), "test": ({"split": "test"}, 3)},
    "CLEVRClassification": {"train": ({"split": "train"}, 3), "val": ({"split": "val"}, 2), "test": ({"split": "test"}, 2)},
    "OxfordIIITPet": {"trainval": ({"split": "trainval", "target_types": ["category", "segmentation"]}, 2),
                      "test": ({"split": "test"}, 1)},
    "Country211": {"train": ({"split": "train"}, 4), "test": ({"split": "test"}, 4)},
    "FGVCAircraft": {"trainval": ({"split": "trainval"}, 2), "test-family": ({"split": "test", "annotation_level": "family"}, 2)},
    "EuroSAT": {"all": ({}, 4)},
    "RenderedSST2": {"train": ({"split": "train"}, 4), "val": ({"split": "val"}, 4)},
    "Flowers102": {"train": ({"split": "train"}, 2), "test": ({"split": "test"}, 2)},
    "Imagenette": {"160px-train": ({"split": "train", "size": "160px"}, 4), "160px-val": ({"split": "val", "size": "160px"}, 4)},
    "PhotoTour": {"train": ({"name": PHOTOTOUR_NAME, "train": True}, 4), "test": ({"name": PHOTOTOUR_NAME, "train": False}, 3)},
    "Middlebury2014Stereo": {"train": ({"split": "train"}, 10), "train-both": ({"split": "train", "calibration": "both"}, 20),
                             "test": ({"split": "test", "calibration": None}, 15)},
}
# Built with download=False only: torchvision's download=True for Middlebury2014Stereo's test
# split calls os.makedirs(root/"Middlebury2014"/"test") without exist_ok (the loader records
# what it raises).
NO_DOWNLOAD_TRUE = {("Middlebury2014Stereo", "test")}


def pack_wanted() -> str:
    return json.dumps({cls: {label: [kwargs, [False] if (cls, label) in NO_DOWNLOAD_TRUE else [False, True]]
                             for label, (kwargs, _) in v.items()} for cls, v in VARIANTS.items()})

