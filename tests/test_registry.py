"""Registry: the built-in Keras datasets, user registry files, helpful errors."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from prefetch.errors import ExitCode, RegistryError, UnknownDatasetError
from prefetch.cache.registry import BUILTIN, load_registry, parse_registry_file
from tests.conftest import run_cli

KERAS_DATASETS = {"mnist", "fashion_mnist", "cifar10", "cifar100", "imdb", "reuters",
                  "boston_housing", "california_housing"}
G = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
T = "https://www.cs.toronto.edu/~kriz/"


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- built-in


def test_builtin_registry_has_every_keras_dataset_with_origins_and_hashes():
    registry = load_registry()
    assert set(registry.datasets) == KERAS_DATASETS
    files = {f.name: f for spec in registry.datasets.values() for f in spec.files}
    # Origins and hashes from DESIGN.md §4 (as in the Keras sources).
    expected = {
        "mnist.npz": (G, "sha256", "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"),
        "cifar-10-python.tar.gz": (T, "sha256", "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"),
        "cifar-100-python.tar.gz": (T, "sha256", "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7"),
        "imdb.npz": (G, "sha256", "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"),
        "imdb_word_index.json": (G, "md5", "bfafd718b763782e994055a2d397834f"),
        "reuters.npz": (G, "sha256", "d6586e694ee56d7a4e65172e12b3e987c03096cb01eab99753921ef915959916"),
        "reuters_word_index.json": (G, "md5", "4d44cc38712099c9e383dc6e5f11a921"),
        "boston_housing.npz": (G, "sha256", "f553886a1f8d56431e820c5b82552d9d95cfcb96d1e678153f8839538947dff5"),
        "california_housing.npz": (G, "sha256", "1a2e3a52e0398de6463aebe6f4a8da34fb21fbb6b934cf88c3425e766f2a1a6f"),
    }
    for name, (base, algorithm, digest) in expected.items():
        assert files[name].url == base + name
        assert (files[name].expected.algorithm, files[name].expected.hexdigest) == (algorithm, digest)
    # Keras ships no hash for fashion-mnist: these are TFDS's url_checksums/fashion_mnist.txt.
    fashion = {
        "train-labels-idx1-ubyte.gz": (29515, "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
        "train-images-idx3-ubyte.gz": (26421880, "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
        "t10k-labels-idx1-ubyte.gz": (5148, "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"),
        "t10k-images-idx3-ubyte.gz": (4422102, "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
    }
    for name, (size, digest) in fashion.items():
        assert files[name].url == G + name
        assert (files[name].expected.algorithm, files[name].expected.hexdigest, files[name].size) == ("sha256", digest, size)
        assert "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/" + name in files[name].urls
    assert all(spec.source == "built-in" for spec in registry.datasets.values())
    # Every built-in file has a hash and at least one documented copy besides its origin.
    assert all(f.expected is not None and len(f.urls) >= 2 and f.urls[0] == f.url for f in files.values())


def test_urls_list_and_size(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(
        '[both]\n[[both.files]]\nurl = "https://a.example/x.bin"\n'
        'urls = ["https://b.example/x.bin", "https://a.example/x.bin"]\nsize = 5\n'
        '[only]\n[[only.files]]\nurls = ["https://c.example/y.bin", "https://d.example/z.bin"]\n'
    )
    specs = {s.name: s.files[0] for s in parse_registry_file(path)}
    assert specs["both"].urls == ("https://a.example/x.bin", "https://b.example/x.bin") and specs["both"].size == 5
    assert specs["only"].url == "https://c.example/y.bin" and specs["only"].name == "y.bin"
    assert specs["only"].alternates == ("https://d.example/z.bin",) and specs["only"].size is None


def test_names_accept_dashes_and_underscores_and_any_case():
    registry = load_registry()
    assert registry.get("fashion-mnist").name == "fashion_mnist"
    assert registry.get("Boston-Housing").name == "boston_housing"


@pytest.mark.parametrize(("typo", "suggestion"), [("cifar11", "cifar10"), ("minst", "mnist"), ("imbd", "imdb")])
def test_unknown_dataset_suggests_close_names(typo, suggestion):
    with pytest.raises(UnknownDatasetError) as info:
        load_registry().get(typo)
    assert f"did you mean {suggestion}" in str(info.value) or suggestion in str(info.value).split("did you mean")[1]
    assert info.value.exit_code == ExitCode.USAGE


def test_unknown_dataset_on_the_cli_exits_2_with_suggestions(home):
    proc = run_cli("get", "cifar11")

    assert proc.returncode == 2
    errors = error_lines(proc.stderr)
    assert len(errors) == 1 and proc.stderr.strip() == errors[0]
    assert "unknown dataset 'cifar11'" in errors[0] and "did you mean" in errors[0] and "cifar10" in errors[0]


# --------------------------------------------------------------------------- user registry


def test_user_registry_adds_and_overrides(tmp_path):
    user = write(tmp_path / "mine.toml", f"""
        [toy]
        description = "a toy"
        [[toy.files]]
        url = "http://127.0.0.1:1/data/toy.bin"
        hash = "{'0' * 64}"

        [mnist]
        description = "our mnist"
        [[mnist.files]]
        name = "mnist.npz"
        url = "http://127.0.0.1:1/mnist.npz"
        md5 = "{'a' * 32}"
    """)

    registry = load_registry(extra_files=[user])

    toy = registry.get("toy")
    assert toy.source == str(user)
    [f] = toy.files
    assert (f.name, f.target, f.expected.algorithm) == ("toy.bin", "toy.bin", "sha256")  # name from the URL
    mnist = registry.get("mnist")
    assert mnist.description == "our mnist" and mnist.files[0].url == "http://127.0.0.1:1/mnist.npz"
    assert mnist.files[0].expected.algorithm == "md5"
    assert registry.get("cifar10").source == "built-in"  # the rest stays


def test_registry_toml_in_the_config_dir_is_read(tmp_path):
    config = tmp_path / "config"
    write(config / "registry.toml", """
        [extra]
        [[extra.files]]
        url = "https://example.org/extra.zip"
    """)
    assert "extra" in load_registry(config_dir=config).datasets
    assert "extra" not in load_registry(config_dir=tmp_path / "nothing").datasets


def test_cli_gets_a_user_dataset_and_an_overridden_builtin(origin, home, tmp_path):
    toy, mnist = b"toy bytes" * 100, b"not the real mnist" * 50
    origin.put("toy.bin", toy)
    origin.put("mnist.npz", mnist)
    user = write(tmp_path / "mine.toml", f"""
        [toy]
        [[toy.files]]
        url = "{origin.url_for('toy.bin')}"
        sha256 = "{hashlib.sha256(toy).hexdigest()}"
        target = "toys/toy.bin"

        [mnist]
        [[mnist.files]]
        url = "{origin.url_for('mnist.npz')}"
        sha256 = "{hashlib.sha256(mnist).hexdigest()}"
    """)

    proc = run_cli("get", "toy", "mnist", "--registry", str(user))

    assert proc.returncode == 0, proc.stderr
    datasets = home / ".keras" / "datasets"
    assert (datasets / "toys" / "toy.bin").read_bytes() == toy
    assert (datasets / "mnist.npz").read_bytes() == mnist  # the override's URL and hash were used

    listed = run_cli("list", "--registry", str(user))
    assert listed.returncode == 0
    rows = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[1:]}
    assert rows["toy"] == "complete" and rows["mnist"] == "complete" and rows["cifar10"] == "missing"


def test_config_dir_registry_is_used_by_the_cli(origin, home):
    origin.put("conf.bin", b"from the config dir")
    write(home / ".prefetch" / "config" / "registry.toml", f"""
        [conf]
        [[conf.files]]
        url = "{origin.url_for('conf.bin')}"
    """)

    proc = run_cli("get", "conf")

    assert proc.returncode == 0, proc.stderr
    assert (home / ".keras" / "datasets" / "conf.bin").read_bytes() == b"from the config dir"


# --------------------------------------------------------------------------- malformed files

BAD_REGISTRIES = [
    ("bad TOML", "[toy\nurl = 1\n", "TOML"),
    ("not a table", "toy = 3\n", "[toy]"),
    ("unknown dataset key", '[toy]\nurl = "https://example.org/a"\n[[toy.files]]\nurl = "https://example.org/a"\n', "url"),
    ("no files", '[toy]\ndescription = "x"\n', "toy.files"),
    ("unknown file key", '[[toy.files]]\nurl = "https://example.org/a"\nsha1 = "00"\n', "sha1"),
    ("missing url", '[[toy.files]]\nname = "a.bin"\n', "url"),
    ("url not http", '[[toy.files]]\nurl = "ftp://example.org/a"\n', "url"),
    ("bad sha256", '[[toy.files]]\nurl = "https://example.org/a"\nsha256 = "xyz"\n', "sha256"),
    ("short md5", '[[toy.files]]\nurl = "https://example.org/a"\nmd5 = "abcd"\n', "md5"),
    # (a sha256 and an md5 together are one file's two hashes, both checked: tests/test_s21_two_hashes_everywhere.py)
    ("hash beside sha256", f'[[toy.files]]\nurl = "https://example.org/a"\nhash = "{"a" * 32}"\nsha256 = "{"b" * 64}"\n',
     "hash"),
    ("target escapes", '[[toy.files]]\nurl = "https://example.org/a"\ntarget = "../../etc/a"\n', "target"),
    ("absolute extract", '[[toy.files]]\nurl = "https://example.org/a"\nextract = ["/tmp/x"]\n', "extract"),
    ("urls not a list", '[[toy.files]]\nurls = "https://example.org/a"\n', "urls"),
    ("urls not http", '[[toy.files]]\nurl = "https://example.org/a"\nurls = ["ftp://x.org/a"]\n', "urls"),
    ("size not a number", '[[toy.files]]\nurl = "https://example.org/a"\nsize = "5"\n', "size"),
    ("also not a list", '[[toy.files]]\nurl = "https://example.org/a"\nalso = "b"\n', "also"),
    ("name with a slash", '[[toy.files]]\nurl = "https://example.org/a"\nname = "x/y"\n', "name"),
    ("description not a string", '[toy]\ndescription = 3\n[[toy.files]]\nurl = "https://example.org/a"\n', "description"),
]


@pytest.mark.parametrize(("text", "key"), [case[1:] for case in BAD_REGISTRIES], ids=[case[0] for case in BAD_REGISTRIES])
def test_malformed_registry_names_file_and_key(tmp_path, text, key):
    path = write(tmp_path / "bad.toml", text)

    with pytest.raises(RegistryError) as info:
        parse_registry_file(path)

    message = str(info.value)
    assert str(path) in message and key in message
    assert "\n" not in message.strip() or key == "TOML"
    assert info.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("text", "key"),
    [case[1:] for case in BAD_REGISTRIES if case[0] in ("bad TOML", "unknown file key", "bad sha256", "target escapes")],
)
def test_malformed_registry_on_the_cli_is_one_line_exit_2(home, tmp_path, text, key):
    path = write(tmp_path / "bad.toml", text)

    proc = run_cli("get", "mnist", "--registry", str(path))

    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefetch: error:")
    assert str(path) in lines[0] and key in lines[0]


def test_missing_registry_file_is_a_usage_error(home, tmp_path):
    proc = run_cli("get", "mnist", "--registry", str(tmp_path / "nope.toml"))

    assert proc.returncode == 2
    assert error_lines(proc.stderr) == [f"prefetch: error: registry file {tmp_path / 'nope.toml'} does not exist"]


def test_builtin_file_is_the_shipped_toml():
    assert BUILTIN.name == "datasets.toml" and BUILTIN.is_file()
    assert {spec.name for spec in parse_registry_file(BUILTIN)} == KERAS_DATASETS
