"""The torchvision tables prefetch ships (data, read without torch) against the installed torchvision.

A torchvision release that changes a URL, an md5, a file name, a folder or a weights entry
fails here; ``python tools/torchvision_weights.py`` regenerates the weights table.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from pathlib import Path

import torchvision
import torchvision.datasets as D

from prefetch.cache.torchvision import WEIGHTS_FILE, load_tables

REPO = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("torchvision_weights", REPO / "tools" / "torchvision_weights.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_weights_table_is_what_the_installed_torchvision_lists():
    tool = _tool()
    models = tool.collect()
    assert WEIGHTS_FILE.read_text(encoding="utf-8") == tool.render(models), \
        "torch_weights.toml is stale: run python tools/torchvision_weights.py"
    tables = load_tables()
    assert sum(len(w) for w in tables.weights.values()) == sum(len(m["weights"]) for m in models.values())
    weights = torchvision.models.get_model_weights("resnet50")
    assert tables.weights_for("resnet50", None).url == weights.DEFAULT.url
    assert tables.weights_for("resnet50", "IMAGENET1K_V1").url == weights.IMAGENET1K_V1.url


def _mnist_family(cls) -> list[tuple[str, str, list[str]]]:
    return [(name, md5, [m + name for m in cls.mirrors]) for name, md5 in cls.resources]


def _one(url: str, name: str, md5: str) -> tuple[str, str, list[str]]:
    return (name, md5, [url])


def _expected(cls_name: str) -> list[tuple[str, str, list[str]]]:
    """(file name, md5, the class's own URLs) per file, read from the installed class."""
    cls = getattr(D, cls_name)
    if cls_name in ("MNIST", "FashionMNIST", "KMNIST"):
        return _mnist_family(cls)
    if cls_name == "QMNIST":
        return [(u.rsplit("/", 1)[1], m, [u]) for files in cls.resources.values() for u, m in files]
    if cls_name in ("CIFAR10", "CIFAR100", "STL10"):
        return [_one(cls.url, cls.filename, cls.tgz_md5)]
    if cls_name in ("SVHN", "USPS"):
        return [_one(u, n, m) for u, n, m in cls.split_list.values()]
    if cls_name == "SEMEION":
        return [_one(cls.url, cls.filename, cls.md5_checksum)]
    if cls_name == "MovingMNIST":
        md5 = re.search(r'md5="([0-9a-f]{32})"', inspect.getsource(cls.download)).group(1)
        return [_one(cls._URL, cls._URL.rsplit("/", 1)[1], md5)]
    if cls_name == "Omniglot":
        return [_one(f"{cls.download_url_prefix}/{n}.zip", f"{n}.zip", m) for n, m in cls.zips_md5.items()]
    mine = _expected_more(cls_name, cls)
    if mine is not None:
        return mine
    raise AssertionError(f"no reader for {cls_name}'s table: add one here")


def _expected_more(cls_name: str, cls) -> list[tuple[str, str | None, list[str]]] | None:
    """The same for the classes whose files are saved under the name the class gives them
    (``filename=``), years, versions and devkits; None for a class not read here."""
    from urllib.parse import urljoin

    from torchvision.datasets import inaturalist, voc

    if cls_name == "SUN397":
        return [_one(cls._DATASET_URL, "SUN397.tar.gz", cls._DATASET_MD5)]
    if cls_name in ("VOCSegmentation", "VOCDetection"):
        return [_one(d["url"], d["filename"], d["md5"]) for d in voc.DATASET_YEAR_DICT.values()]
    if cls_name == "SBDataset":
        return [_one(cls.url, cls.filename, cls.md5),
                _one(cls.voc_train_url, cls.voc_split_filename, cls.voc_split_md5)]
    if cls_name == "Places365":
        files = [*cls._DEVKIT_META.values(), *cls._IMAGES_META.values()]
        return [_one(urljoin(cls._BASE_URL, n), n, m) for n, m in files]
    if cls_name == "Kitti":  # no md5 in torchvision
        return [_one(cls.data_url + n, n, None) for n in cls.resources]
    if cls_name == "INaturalist":
        return [_one(u, f"{v}.tgz", inaturalist.DATASET_MD5[v]) for v, u in inaturalist.DATASET_URLS.items()]
    if cls_name in ("Food101", "DTD"):
        return [_one(cls._URL, cls._URL.rsplit("/", 1)[1], cls._MD5)]
    if cls_name == "EMNIST":
        return [_one(cls.url, "gzip.zip", cls.md5)]
    return None


def _folder(cls_name: str) -> str:
    """The directory under root where the class keeps its downloaded files."""
    cls = getattr(D, cls_name)
    if hasattr(cls, "raw_folder"):
        bare = cls.__new__(cls)
        bare.root = "ROOT"
        return os.path.relpath(bare.raw_folder, "ROOT")
    if cls_name == "MovingMNIST":
        return "MovingMNIST"
    if cls_name == "Omniglot":
        return cls.folder
    if cls_name == "Kitti":
        bare = cls.__new__(cls)
        bare.root = "ROOT"
        return os.path.relpath(bare._raw_folder, "ROOT")
    if cls_name == "DTD":
        return cls.__name__.lower()  # DTD._base_folder: root/<class name, lower case>
    return ""


def test_every_dataset_entry_matches_the_installed_class():
    tables = load_tables()
    for name, ds in tables.datasets.items():
        if name in _READERS_B:
            continue  # test_more_classes_match_the_installed_class (their layouts vary more)
        # The name the file has under root (save_as where the class passes filename=).
        got = sorted((f.local_name, f.expected and f.expected.hexdigest, list(f.urls)) for f in ds.files)
        want = sorted(_expected(name))
        # The class's own URLs come first, in its order; byte-identical copies may follow.
        assert [(n, m) for n, m, _ in got] == [(n, m) for n, m, _ in want], name
        for (_, _, urls), (_, _, own) in zip(got, want):
            assert urls[: len(own)] == own, name
        assert {f.dir for f in ds.files} == {_folder(name)}, name
        archives = {f.name for f in ds.files if f.extract}
        if name in ("CIFAR10", "CIFAR100", "STL10", "Omniglot"):
            assert archives == {f.name for f in ds.files}, name
            assert {e for f in ds.files for e in f.extract} == {_folder(name)}, name
        if hasattr(getattr(D, name), "raw_folder") and name != "EMNIST":
            assert all(f.decompress for f in ds.files), name


def test_what_the_classes_do_after_extracting_is_what_the_table_says():
    """Renames and moves read from the installed classes' own code and tables."""
    import torchvision.datasets.inaturalist as inat

    tables = load_tables()
    for version, url in inat.DATASET_URLS.items():
        (f,) = [f for f in tables.dataset("INaturalist").files if f.split == version]
        assert f.moves == ((os.path.basename(url).removesuffix(".tar.gz"), version),)
    assert 'filename=f"{self.version}.tgz"' in inspect.getsource(D.INaturalist.download)
    places = tables.dataset("Places365")
    for (split, small), (fname, _) in D.Places365._IMAGES_META.items():
        (f,) = [f for f in places.files if f.name == fname]
        assert f.split == split + ("-small" if small else ""), fname
        bare = D.Places365.__new__(D.Places365)
        bare.root, bare.split, bare.small = "", split, small
        moved = dict(f.moves)
        if split.startswith("train"):  # os.rename(images_dir.rsplit("_", 1)[0], images_dir)
            assert moved == {bare.images_dir.rsplit("_", 1)[0]: bare.images_dir}, fname
        else:
            assert moved == {}, fname
    devkits = {f.name: set(f.splits) for f in places.files if f.name.startswith("filelist")}
    for split in D.Places365._SPLITS:
        bare = D.Places365.__new__(D.Places365)
        bare.split = split
        devkit = D.Places365._DEVKIT_META[bare.variant][0]
        assert {split, split + "-small"} <= devkits[devkit], split
    sbd_source = inspect.getsource(D.SBDataset.__init__)
    (sbd,) = [f for f in tables.dataset("SBDataset").files if f.extract]
    assert '["cls", "img", "inst", "train.txt", "val.txt"]' in sbd_source
    assert sbd.moves == tuple((f"benchmark_RELEASE/dataset/{x}", x) for x in ["cls", "img", "inst", "train.txt", "val.txt"])
    assert 'os.path.join(self.raw_folder, "gzip")' in inspect.getsource(D.EMNIST.download)
    assert tables.dataset("EMNIST").files[0].gunzip == "gzip"


def test_every_class_that_downloads_is_covered_or_listed_with_a_reason():
    tables = load_tables()
    downloads = {n for n in D.__all__ if inspect.isclass(getattr(D, n))
                 and "download" in inspect.signature(getattr(D, n).__init__).parameters}
    downloads |= {"EMNIST", "QMNIST", "KMNIST", "FashionMNIST"}  # download= through **kwargs (MNIST's)
    assert len(downloads - {"EMNIST", "QMNIST"}) == 41
    listed = set(tables.datasets) | set(tables.not_covered)
    assert downloads - listed == set()
    assert set(tables.datasets) & set(tables.not_covered) == set()
    assert all(reason.strip() for reason in tables.not_covered.values())


# GTSRB, CLEVRClassification, OxfordIIITPet, Country211, FGVCAircraft, EuroSAT, RenderedSST2,
# Flowers102, Imagenette, PhotoTour, Middlebury2014Stereo: (file name, md5 or None, the class's
# URLs, split or None, directory under root) per file, read from the installed class.


def _method_source(cls, name: str) -> str:
    return inspect.getsource(getattr(cls, name))


def _gtsrb(cls):
    src = _method_source(cls, "download")
    base = re.search(r'base_url = "([^"]+)"', src).group(1)
    train, test = src.split("else:")
    pattern = r'f"\{base_url\}([^"]+)",\s*download_root=str\(self._base_folder\),\s*md5="([0-9a-f]{32})"'
    return [(n, m, [base + n], split, "gtsrb") for split, part in (("train", train), ("test", test))
            for n, m in re.findall(pattern, part)]


def _archive_into(cls, url: str, md5: str | None, folder: str):
    return [(url.rsplit("/", 1)[1], md5, [url], None, folder)]


def _eurosat(cls):
    src = _method_source(cls, "download")
    url = re.search(r'"(https://[^"]+)"', src).group(1)
    assert "download_root=self._base_folder" in src and 'os.path.join(self.root, "eurosat")' in inspect.getsource(cls)
    return _archive_into(cls, url, re.search(r'md5="([0-9a-f]{32})"', src).group(1), "eurosat")


def _flowers(cls):
    return [(n, m, [cls._download_url_prefix + n], None, "flowers-102") for n, m in cls._file_dict.values()]


def _middlebury(cls):
    src = _method_source(cls, "_download_dataset")
    base = re.search(r'base_url = "([^"]+)"', src).group(1)
    for shape in ('for calibration in ["perfect", "imperfect"]', 'scene_name = f"{split_scene}-{calibration}"',
                  'scene_url = f"{base_url}/{scene_name}.zip"', 'root = Path(root) / "Middlebury2014"'):
        assert shape in src, shape
    scenes = [(f"{scene}-{cal}.zip", None, [f"{base}/{scene}-{cal}.zip"], split, f"Middlebury2014/{split}")
              for split in ("train", "additional") for scene in cls.splits[split] for cal in ("perfect", "imperfect")]
    # The test split: one zip into root/Middlebury2014, whose MiddEval3/testF/* the class moves into test/.
    test_url = re.search(r'test_set_url = "([^"]+)"', src).group(1)
    assert "download_root=str(root)" in src and 'root / "MiddEval3/testF"' in src
    return [*scenes, (test_url.rsplit("/", 1)[1], None, [test_url], "test", "Middlebury2014")]


_READERS_B = {
    "GTSRB": _gtsrb,
    "CLEVRClassification": lambda c: _archive_into(c, c._URL, c._MD5, "clevr"),
    "OxfordIIITPet": lambda c: [x for u, m in c._RESOURCES for x in _archive_into(c, u, m, "oxford-iiit-pet")],
    "Country211": lambda c: _archive_into(c, c._URL, c._MD5, ""),
    "FGVCAircraft": lambda c: _archive_into(c, c._URL, None, ""),  # torchvision has no md5 for it
    "EuroSAT": _eurosat,
    "RenderedSST2": lambda c: _archive_into(c, c._URL, c._MD5, ""),
    "Flowers102": _flowers,
    "Imagenette": lambda c: [(u.rsplit("/", 1)[1], m, [u], size, "") for size, (u, m) in c._ARCHIVES.items()],
    "PhotoTour": lambda c: [(n, m, [u], name, "") for name, (u, n, m) in c.urls.items()],
    "Middlebury2014Stereo": _middlebury,
}


def test_more_classes_match_the_installed_class():
    tables = load_tables()
    for name, reader in _READERS_B.items():
        cls = getattr(D, name)
        ds = tables.datasets[name]
        got = sorted((f.name, f.expected.hexdigest if f.expected else None, f.split, f.dir) for f in ds.files)
        want = sorted(reader(cls))
        assert got == sorted((n, m, s, d) for n, m, _, s, d in want), name
        own = {n: urls for n, _, urls, _, _ in want}
        for f in ds.files:
            assert list(f.urls[: len(own[f.name])]) == own[f.name], (name, f.name)
        # Where the class looks for its folder under root (its source names it).
        folders = {d.split("/")[0] for *_, d in want if d}
        assert all(f'"{d}"' in inspect.getsource(cls) for d in folders), name
    # Each archive is extracted where download_and_extract_archive extracts it: its own folder,
    # except PhotoTour (zipfile into root/<name>); Flowers102's .mat files are not archives.
    for name in ("GTSRB", "CLEVRClassification", "OxfordIIITPet", "Country211", "FGVCAircraft", "EuroSAT",
                 "RenderedSST2", "Imagenette", "Middlebury2014Stereo"):
        assert all(f.extract == (f.dir,) for f in tables.datasets[name].files if f.split != "test" or name == "GTSRB"), name
    test = [f for f in tables.datasets["Middlebury2014Stereo"].files if f.split == "test"]
    assert [(f.extract, f.extract_from) for f in test] == [(("Middlebury2014/test",), "MiddEval3/testF")]
    assert all(f.extract == (f.split,) for f in tables.datasets["PhotoTour"].files)
    assert 'z.extractall(self.data_dir)' in inspect.getsource(D.PhotoTour.download)
    assert [f.extract for f in tables.datasets["Flowers102"].files] == [("flowers-102",), (), ()]
    assert 'root = Path(root) / "Middlebury2014"' in _method_source(D.Middlebury2014Stereo, "_download_dataset")
