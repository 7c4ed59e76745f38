"""The docs' Python examples run as typed, against a local nginx (never the internet).

Each ```python block of README.md, docs/python-api.md and docs/streaming.md runs in a fresh Python
process, one page's blocks in order in one namespace (as a notebook's cells). What the
examples leave to the reader is filled in, and only that:

* the hosts ``example.org`` and ``data.example.org`` lead to a local nginx serving the
  files the examples name (synthetic Keras datasets under the built-in names, through
  ``~/.config/prefetch/registry.toml``; tar shards; an npz; a .tgz);
* a hash written as hex digits and ``...`` (``"9f86d08..."``, ``#sha256=...``) is the
  served file's hash;
* the names a block uses without defining (``shard_urls``, ``hashes``, ``url``,
  ``train_on``, ``decode``) are defined before the first block;
* Keras's own check of the real datasets' hashes accepts the synthetic files, and a
  download Keras tries itself fails the example (as in test_keras.py).

A block importing a library that is not installed (tensorflow) is skipped, said in the
output. Any other exception fails the test with the block and its traceback.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests import datasets_synth
from tests.nginx import NginxServer, nginx_binary

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = ["README.md", "docs/python-api.md", "docs/streaming.md"]
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
SHARDS = 3


def python_blocks(page: Path) -> list[str]:
    return FENCE.findall(page.read_text(encoding="utf-8"))


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _tar_gz(folder: str, members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def served_files() -> dict[str, bytes]:
    files = dict(datasets_synth.build_files())
    for i in range(SHARDS):
        files[f"train-{i:04d}.tar"] = _tar({f"s{i}a.jpg": b"jpg %d a" % i, f"s{i}a.cls": b"%d" % i,
                                            f"s{i}b.jpg": b"jpg %d b" % i, f"s{i}b.cls": b"%d" % i})
    files["data.npz"] = files["mnist.npz"]
    files["flower_photos.tgz"] = _tar_gz("flower_photos", {"daisy/1.jpg": b"daisy", "roses/2.jpg": b"rose"})
    files["images.tar.gz"] = _tar_gz("images", {"a.png": b"png a"})
    return files


def fill_in(code: str, base: str, files: dict[str, bytes]) -> str:
    """``code`` with the example hosts leading to ``base`` and elided hashes filled in."""
    def real_hash(match: re.Match) -> str:
        # The file is the one named on the same line (the URL's last segment).
        line = code[code.rfind("\n", 0, match.start()) + 1:code.find("\n", match.end())]
        named = [n for n in files if n in line] or ["data.npz"]
        data = files[max(named, key=len)]
        algorithm = "md5" if "md5" in match.group(0) else "sha256"
        return match.group(1) + hashlib.new(algorithm, data).hexdigest()

    code = re.sub(r"((?:md5:|sha256=)?)[0-9a-f]*\.\.\.(?=[\"'])", real_hash, code)
    code = re.sub(r"https://(?:data\.)?example\.org/", base, code)
    return code


PRELUDE = '''
import hashlib, os, sys
from pathlib import Path
_base = {base!r}
hashes = {hashes!r}
shard_urls = [f"{{_base}}train-{{i:04d}}.tar#sha256={{h}}" for i, h in enumerate(hashes)]
url = _base + "data.npz"
_trained = []
def train_on(path):
    assert Path(path).is_file(), path
    _trained.append(str(path))
def decode(sample):
    return sample
# Keras checks the real datasets' hashes, which the synthetic ones cannot match (as in
# test_keras.py); any download Keras tries itself fails the example.
import keras.src.utils.file_utils as _file_utils
def _no_download(url, *args, **kwargs):
    raise AssertionError(f"Keras tried to download {{url}}: the example's prefetch did not place it")
_file_utils.validate_file = lambda *args, **kwargs: True
_file_utils.urlretrieve = _no_download
'''


def run_page(page: str, home: Path, work: Path, base: str, files: dict[str, bytes]) -> subprocess.CompletedProcess:
    hashes = [hashlib.sha256(files[f"train-{i:04d}.tar"]).hexdigest() for i in range(SHARDS)]
    script = [PRELUDE.format(base=base, hashes=hashes)]
    for number, block in enumerate(python_blocks(ROOT / page), 1):
        code = fill_in(block, base, files)
        script.append(
            f"print('-- block {number}', flush=True)\n"
            f"_code = {code!r}\n"
            "try:\n"
            f"    exec(compile(_code, '{page} block {number}', 'exec'))\n"
            "except ModuleNotFoundError as exc:\n"
            "    if exc.name in ('tensorflow',):\n"
            f"        print('-- block {number} skipped:', exc, flush=True)\n"
            "    else:\n"
            "        raise\n"
        )
    script.append("print('-- trained on', len(_trained), 'files', flush=True)\n")
    env = dict(os.environ)
    env["KERAS_BACKEND"] = "numpy"
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", "\n".join(script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def docs_origin(home, tmp_path):
    if nginx_binary() is None:
        raise RuntimeError("nginx is not installed: apt-get install nginx (bash tests/run.sh does this)")
    files = served_files()
    root = tmp_path / "www"
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)
    with NginxServer(root) as server:
        base = server.url_for("")
        datasets_synth.write_registry(Path(os.environ["PREFETCH_HOME"]) / "config" / "registry.toml", base, files)
        yield base, files


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.split("/")[-1])
def test_python_examples_run_as_typed(page, docs_origin, home, tmp_path):
    base, files = docs_origin
    work = tmp_path / "cwd"
    work.mkdir()
    proc = run_page(page, home, work, base, files)
    assert proc.returncode == 0, f"an example of {page} fails:\n{proc.stdout}\n{proc.stderr}"
    blocks = len(python_blocks(ROOT / page))
    print(proc.stdout)  # (with -s: which blocks ran, which were skipped)
    assert f"-- block {blocks}" in proc.stdout
    trained = re.search(r"-- trained on (\d+) files", proc.stdout)
    if "train_on(" in (ROOT / page).read_text(encoding="utf-8"):
        assert trained and int(trained.group(1)) >= SHARDS, proc.stdout


def test_fill_in_gives_real_hashes_and_local_hosts():
    """The filling-in is what makes the examples runnable; it must not silently stop matching."""
    files = {"data.npz": b"npz", "images.tar.gz": b"tgz"}
    code = ('p = fetch("https://example.org/data.npz", sha256="9f86d08...")\n'
            'q = fetch("https://example.org/images.tar.gz#sha256=...", extract=True)\n'
            'r = fetch(url, known_hash="md5:0cc175b9...")\n')
    out = fill_in(code, "http://127.0.0.1:1/", files)
    assert "example.org" not in out and "..." not in out
    assert hashlib.sha256(b"npz").hexdigest() in out
    assert "#sha256=" + hashlib.sha256(b"tgz").hexdigest() in out
    assert "md5:" + hashlib.md5(b"npz").hexdigest() in out
