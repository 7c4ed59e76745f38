"""The docs' examples run as typed, against a local nginx (never the internet).

Each ```python block of README.md, docs/python-api.md and docs/streaming.md runs in a fresh Python
process, one page's blocks in order in one namespace (as a notebook's cells). Each
``!prefetch get`` line of docs/commands/get.md, and streaming.md's shell pipelines, run in a
shell in one cwd, through a ``prefetch`` on PATH; then ``prefetch wait`` for their jobs, and
the files, the ``status --json`` keys and the state dir are checked against the pages. What
the examples leave to the reader is filled in, and only that:

* the hosts ``example.org``, ``data.example.org``, ``files.example.org`` and the docs' flat
  mirror ``http://10.0.0.5/`` lead to a local nginx serving the files the examples name
  (synthetic Keras datasets under the built-in names, through the config dir's
  ``registry.toml``; tar shards; an npz; a .tgz; get.md's files);
* a hash written as hex digits and ``...`` (``"9f86d08..."``, ``#sha256=...``) is the hash
  of the file named before it on its line;
* the names a block uses without defining (``shard_urls``, ``hashes``, ``url``,
  ``train_on``, ``decode``) are defined before the first block; the shell gets get.md's own
  ``urls.txt``, a ``shards.txt``, adding.md's ``mirrors.toml`` and a ``preprocess.py``;
* what torchrun sets (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) is set for one
  rank of one on 127.0.0.1, so streaming.md's DDP blocks run in the page's one process;
* Keras's own check of the real datasets' hashes accepts the synthetic files, and a
  download Keras tries itself fails the example (as in test_keras.py).

A block importing a library that is not installed (tensorflow) is skipped, said in the
output. Not run: lines that need a store (``s3://``) or a mount (``/mnt/...``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import socket
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
    # docs/commands/get.md: its examples' URLs; its urls.txt gives full hashes, of b"test" and b"a".
    files["data.zip"] = files["a.npz"] = files["private.bin"] = files["mnist.npz"]
    files["b.csv"] = b"a,b\n1,2\n"
    files["train.npz"] = files["extra.bin"] = b"test"
    files["labels.csv"] = b"a"
    return files


def fill_in(code: str, base: str, files: dict[str, bytes]) -> str:
    """``code`` with the example hosts leading to ``base`` and elided hashes filled in."""
    def real_hash(match: re.Match) -> str:
        # The file is the one named last before the hash on its line (the URL's last segment).
        before = code[code.rfind("\n", 0, match.start()) + 1:match.start()]
        named = max(files, key=lambda n: (before.rfind(n), len(n)))
        data = files[named if named in before else "data.npz"]
        prefix = match.group("prefix") or ""
        md5 = "md5" in prefix or before.rstrip().endswith("--md5")
        return prefix + hashlib.new("md5" if md5 else "sha256", data).hexdigest()

    # "9f86d08...", sha256=..., md5:0cc175b9..., #md5=0cc175b9... (never a bare `...`: `get ... -b`)
    code = re.sub(r"(?:(?P<prefix>(?:md5|sha256)[:=])[0-9a-f]*|[0-9a-f]{6,})\.\.\.(?=[\"'\s]|$)", real_hash,
                  code, flags=re.M)
    code = re.sub(r"https://(?:data\.|files\.)?example\.org/|http://10\.0\.0\.5/|https://figshare\.com/", base, code)
    return code


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    # What torchrun sets for the DDP example (streaming.md), one rank of one on loopback
    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()))
    return subprocess.run([sys.executable, "-c", "\n".join(script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def docs_origin(home, tmp_path):
    if nginx_binary() is None:
        raise RuntimeError("nginx is not installed: apt-get install nginx (bash tests/run.sh does this)")
    files = served_files()
    root = tmp_path / "www"
    root.mkdir()
    (root / "keras-datasets").mkdir()  # the docs' flat mirror, http://10.0.0.5/keras-datasets/
    for name, data in files.items():
        (root / name).write_bytes(data)
        (root / "keras-datasets" / name).write_bytes(data)
    # get.md's --content-disposition example: a link whose path names no file, named by its server.
    (root / "ndownloader" / "files").mkdir(parents=True)
    (root / "ndownloader" / "files" / "12345").write_bytes(b"figshare,rows\n")
    for version in ("v1", "v2"):  # get.md's "One name, another link": two links to one x.csv
        (root / version).mkdir()
        (root / version / "x.csv").write_bytes(f"id,{version}\n".encode())
    named = "location = /ndownloader/files/12345 { add_header Content-Disposition 'attachment; filename=\"rows.csv\"'; }"
    with NginxServer(root, location=named) as server:
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
    shell = ("!prefetch get https://example.org/images.tar.gz#sha256=9f86d08... https://example.org/data.npz#md5=0cc...\n"
             "!prefetch get https://example.org/data.npz --md5 0cc175b9... -b   # and get ... -b stays\n")
    out = fill_in(shell, "http://127.0.0.1:1/", files)
    assert out.splitlines()[0].endswith(f"images.tar.gz#sha256={hashlib.sha256(b'tgz').hexdigest()} "
                                        f"http://127.0.0.1:1/data.npz#md5={hashlib.md5(b'npz').hexdigest()}")
    assert f"--md5 {hashlib.md5(b'npz').hexdigest()} -b   # and get ... -b stays" in out


# The shell examples of docs/commands/get.md that need only what a test has: the local nginx
# (example.org, and the docs' flat mirror http://10.0.0.5/keras-datasets/), the registry's
# names, adding.md's mirrors.toml and this cwd. Not run: a store (s3://), a mount (/mnt/...).
NOT_HERE = ("s3://", "/mnt/")


def shell_examples(page: Path) -> list[str]:
    """The ``prefetch get`` lines of ``page``: ``!`` cells of its text blocks, and its bash blocks."""
    lines = []
    for kind, block in re.findall(r"^```(text|bash)\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S):
        for line in block.splitlines():
            line = line[1:] if kind == "text" and line.startswith("!") else line if kind == "bash" else ""
            if "prefetch get" in line and not any(n in line for n in NOT_HERE):
                lines.append(re.split(r"\s+#", line)[0].strip())
    return lines


def input_file(page: Path) -> str:
    """The ``# urls.txt`` block of ``page``, as the file a reader saves."""
    block = re.search(r"^```text\n# urls\.txt\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S)
    assert block, f"{page.name} shows a urls.txt"
    return block.group(1)


def documented_status_schema() -> dict:
    """The ``status --json`` example of jobs.md, its ``//`` comments removed."""
    text = (DOCS / "commands" / "jobs.md").read_text(encoding="utf-8")
    block = re.search(r"^```text\n(\{\n\s*\"schema\".*?)^```", text, re.M | re.S)
    assert block, "jobs.md shows the status --json schema"
    return json.loads(re.sub(r"\s*//[^\n]*", "", block.group(1)))


def test_get_examples_run_as_typed(docs_origin, home, tmp_path):
    """Each `!prefetch get` line of get.md and streaming.md's pipelines, typed in a shell in one cwd as in one
    notebook; then `wait`."""
    base, files = docs_origin
    page = DOCS / "commands" / "get.md"
    work = tmp_path / "cwd"
    work.mkdir()
    (work / "urls.txt").write_text(fill_in(input_file(page), base, files), encoding="utf-8")
    adding = re.findall(r"^```toml\n(.*?)^```", (DOCS / "adding.md").read_text(encoding="utf-8"), re.M | re.S)
    (Path(os.environ["PREFETCH_HOME"]) / "config" / "mirrors.toml").write_text(fill_in(adding[1], base, files))
    shards = [f"{base}train-{i:04d}.tar#sha256={hashlib.sha256(files[f'train-{i:04d}.tar']).hexdigest()}"
              for i in range(SHARDS)]
    (work / "shards.txt").write_text("\n".join(shards) + "\n", encoding="utf-8")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "prefetch").write_text(f"#!/bin/sh\nexec {sys.executable} -m prefetch \"$@\"\n", encoding="utf-8")
    (shim / "prefetch").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    lines = shell_examples(page)
    assert len(lines) >= 14 and any("--mirror team" in line for line in lines), lines
    # streaming.md's pipelines; its preprocess.py is the reader's: here it checks it was given a placed file.
    streaming = shell_examples(DOCS / "streaming.md")
    assert len(streaming) == 2 and all("--print-paths" in line or " -0 " in line for line in streaming), streaming
    (work / "preprocess.py").write_text("import pathlib, sys\nassert pathlib.Path(sys.argv[1]).is_file(), sys.argv\n")
    lines += streaming
    failed = []
    for line in [*lines, "prefetch wait"]:
        command = fill_in(line, base, files)
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            failed.append(f"!{line}\n  exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
    assert not failed, "get.md examples that fail as typed:\n" + "\n".join(failed)
    # Where the page says the files go.
    assert (work / "data" / "data.zip").read_bytes() == files["data.zip"]
    assert (work / "data" / "train.npz").read_bytes() == b"test"
    assert (work / "data" / "meta" / "labels.csv").read_bytes() == b"a"
    assert (work / "data" / "x.csv").read_bytes() == b"id,v2\n"  # (v2's link, asked last, replaced v1's file)
    assert (work / "data" / "x.bin").read_bytes() == b"test"
    assert (work / "data" / "rows.csv").read_bytes() == b"figshare,rows\n"  # (--content-disposition)
    assert (work / "data" / "images" / "images" / "a.png").read_bytes() == b"png a"
    assert (work / "data" / "train-0000.tar").read_bytes() == files["train-0000.tar"]
    assert (work / "shards" / "train-0002.tar").read_bytes() == files["train-0002.tar"]
    assert (home / ".keras" / "datasets" / "mnist.npz").is_file()
    # `status --json` has the keys jobs.md's schema shows, no more and no fewer.
    shown = documented_status_schema()
    status = subprocess.run(["/bin/sh", "-c", "prefetch status --json"], cwd=work, env=env, capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    real = json.loads(status.stdout)
    assert sorted(real) == sorted(shown)
    assert all(sorted(job) == sorted(shown["jobs"][0]) for job in real["jobs"]), real["jobs"][0].keys()
    assert all(sorted(f) == sorted(shown["jobs"][0]["files"][0]) for job in real["jobs"] for f in job["files"])
    # Everything these runs left in prefetch's state dir is in where-files-go.md's table.
    table = (DOCS / "where-files-go.md").read_text(encoding="utf-8")
    state = Path(os.environ["PREFETCH_HOME"]) / "state"
    entries = [e.name + ("/" if e.is_dir() else "") for e in state.iterdir()]
    assert "jobs/" in entries and "locks/" in entries
    undocumented = [e for e in entries if f"| `{e}` |" not in table]
    assert not undocumented, f"in the state dir, not in where-files-go.md's table: {undocumented}"
