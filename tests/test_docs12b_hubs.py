"""docs/commands/hf.md and modelscope.md run as typed, against the local hubs (never the internet).

Each page runs as a notebook (tests/docs_pages.py): its ``!prefetch`` lines in page order
through a ``prefetch`` on PATH, in one cwd, then its Python with the REAL huggingface_hub or
modelscope. What the page leaves to the reader is filled in, and only that:

* the repos it names (``Qwen/Qwen2.5-0.5B``, ``ORG/NAME``, ``datasets/ORG/NAME``) are served
  under those names by tests/hub_origin.py and tests/ms_origin.py (``ORG/NAME`` with the branch
  or tag the page asks for, and the ``*.json``/``*.safetensors``/``onnx/`` files its selection
  example picks from);
* the endpoints it names lead to those servers: ``hf-mirror`` is a ``mirrors.toml`` entry of
  that name (so ``mirror use hf-mirror --tool hf`` persists the local hub), and
  ``MODELSCOPE_ENDPOINT`` and the page's ``https://www.modelscope.cn`` are the local ModelScope.

Then the page's Python runs and must find every file without downloading a byte (the
servers count requests). hf.md's block imports transformers; where it is not installed, its
``from_pretrained`` is skipped (said in the output) and the calls it makes are made instead:
``hf_hub_download`` and ``snapshot_download`` with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import hashlib
import re
import json
from pathlib import Path

import pytest

from tests.docs_pages import ROOT, Notebook, isolated_env, localize, page_cells, prefetch_on_path
from tests.hub_origin import HubServer
from tests.ms_origin import MsServer

WEIGHTS = hashlib.sha256(b"qwen-docs").digest() * (3 << 14)  # 1.5 MiB: from the CDN / object storage
QWEN = {
    "config.json": b'{"model_type": "qwen2", "hidden_size": 8, "num_hidden_layers": 1}\n',
    "generation_config.json": b'{"do_sample": false}\n',
    "tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE"}}\n',
    "model.safetensors": WEIGHTS,
}
ORG_NAME = {
    "config.json": b'{"model_type": "tiny"}\n',
    "model.safetensors": hashlib.sha256(b"org-name").digest() * 1024,
    "onnx/model.onnx": b"onnx bytes\n" * 100,
    "onnx/config.json": b'{"onnx": true}\n',
    "README.md": b"# ORG/NAME\n",
}
DATASET = {"data/train.csv": b"x,y\n1,2\n" * 200, "README.md": b"# a dataset\n"}
SELECTED = {"config.json", "model.safetensors"}  # what --include '*.json' --include '*.safetensors' --exclude 'onnx/' picks


@pytest.fixture(scope="module")
def hubs():
    with HubServer() as hf, MsServer(big=1 << 20) as ms:
        hf.add_repo("Qwen/Qwen2.5-0.5B", QWEN, lfs={"model.safetensors"})
        hf.add_repo("ORG/NAME", ORG_NAME, lfs={"model.safetensors", "onnx/model.onnx"}, branches=("main", "v1.0"))
        hf.add_repo("ORG/NAME", DATASET, repo_type="dataset")
        ms.add_repo("Qwen/Qwen2.5-0.5B", QWEN)  # the same weights, byte for byte (--lfs-from)
        ms.add_repo("ORG/NAME", ORG_NAME, revisions=("master", "v1.0.0"))
        ms.add_repo("ORG/NAME", DATASET, kind="datasets")
        yield hf, ms


def notebook(tmp_path: Path, ms: MsServer) -> Notebook:
    home = tmp_path / "home"
    home.mkdir()
    env = isolated_env(home, prefetch_on_path(tmp_path / "bin"))
    env["MODELSCOPE_ENDPOINT"] = ms.url
    work = tmp_path / "notebook"
    work.mkdir()
    return Notebook(work, env)


def run_shell_cells(nb: Notebook, cells: list[tuple[str, str]], hosts: dict[str, str],
                    expected: dict[str, int]) -> list[str]:
    """Run the shell cells; the lines that ended otherwise than the page implies (0 unless ``expected``)."""
    failed = []
    for kind, code in cells:
        if kind != "shell":
            continue
        ran = nb.shell(localize(code, hosts))
        if ran.returncode != expected.get(code, 0):
            failed.append(str(ran))
    return failed


def one_row_per_repo(page: Path, nb: Notebook, repo: str) -> None:
    """The page's `!prefetch status  # one row per repo: ...` is what status showed after its `get REPO -b`."""
    assert re.search(r"^!prefetch status +# one row per repo: bytes, %, speed, ETA$", page.read_text(encoding="utf-8"), re.M)
    status = next(r for r in nb.ran if r.code == "prefetch status")
    rows = status.stdout.splitlines()[1:]
    assert len(rows) == 1 and rows[0].split()[1] == repo, status.stdout


def hf_cache(nb: Notebook) -> Path:
    return Path(nb.env["HOME"]) / ".cache" / "huggingface" / "hub"


HF_CHECK = """
import json, os
from huggingface_hub import hf_hub_download, snapshot_download, try_to_load_from_cache
out = {{}}
for repo, kind, rev in {repos!r}:
    snap = snapshot_download(repo, repo_type=kind, revision=rev)
    out[f"{{kind}}:{{repo}}@{{rev}}"] = sorted(os.path.relpath(os.path.join(r, n), snap)
                                            for r, _, ns in os.walk(snap) for n in ns)
out["config"] = open(hf_hub_download("Qwen/Qwen2.5-0.5B", "config.json")).read()
out["cached"] = isinstance(try_to_load_from_cache("Qwen/Qwen2.5-0.5B", "model.safetensors"), str)
print(json.dumps(out))
"""


def test_hf_page_runs_as_typed(hubs, tmp_path):
    hf, ms = hubs
    nb = notebook(tmp_path, ms)
    config = Path(nb.env["PREFETCH_HOME"]) / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(f'[mirrors.hf-mirror]\nhf = "{hf.url}"\n', encoding="utf-8")
    cells = page_cells(ROOT / "docs" / "commands" / "hf.md")
    shell = [c for k, c in cells if k == "shell"]
    assert len(shell) >= 12 and "prefetch mirror use hf-mirror --tool hf" in shell, shell
    failed = run_shell_cells(nb, cells, {"https://hf-mirror.com": hf.url}, {})
    assert not failed, "hf.md lines that fail as typed:\n" + "\n".join(failed)
    assert nb.shell("prefetch wait").returncode == 0  # (the page's --lfs-from job)

    cache = hf_cache(nb)
    assert (cache / "models--Qwen--Qwen2.5-0.5B").is_dir()
    assert not (cache / "models--ORG--NAME").exists()  # the page's last lines: `rm hf://ORG/NAME`
    assert (cache / "datasets--ORG--NAME").is_dir()
    one_row_per_repo(ROOT / "docs" / "commands" / "hf.md", nb, "hf://Qwen/Qwen2.5-0.5B")

    # The page's Python, offline: every file found, not a byte downloaded.
    before = (len(hf.requests), hf.cdn.bytes_sent, len(ms.requests))
    python = [c for k, c in cells if k == "python"]
    assert len(python) == 1 and "from_pretrained(\"Qwen/Qwen2.5-0.5B\")" in python[0]
    offline = {**nb.env, "HF_HUB_OFFLINE": "1"}
    try:
        import transformers  # noqa: F401
    except ModuleNotFoundError:
        print("-- hf.md's from_pretrained skipped: transformers is not installed; hf_hub_download and "
              "snapshot_download instead")
    else:
        ran = nb.python(python[0], env=offline)
        assert ran.returncode == 0, str(ran)
    repos = [("Qwen/Qwen2.5-0.5B", "model", "main"), ("ORG/NAME", "dataset", "main")]
    ran = nb.python(HF_CHECK.format(repos=repos), env=offline)
    assert ran.returncode == 0, str(ran)
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["model:Qwen/Qwen2.5-0.5B@main"] == sorted(QWEN)
    assert out["dataset:ORG/NAME@main"] == sorted(DATASET)
    assert out["config"] == QWEN["config.json"].decode() and out["cached"]
    assert (len(hf.requests), hf.cdn.bytes_sent, len(ms.requests)) == before


MS_CHECK = """
import json, os
from modelscope import snapshot_download
from modelscope.hub.file_download import model_file_download
out = {{}}
for repo, kind, rev, local in {repos!r}:
    snap = snapshot_download(repo, repo_type=kind, revision=rev, local_files_only=local)
    out[f"{{kind}}:{{repo}}@{{rev}}:{{local}}"] = sorted(os.path.relpath(os.path.join(r, n), snap)
                                                     for r, _, ns in os.walk(snap) for n in ns
                                                     if not n.startswith("."))
print(json.dumps(out))
"""


def test_modelscope_page_runs_as_typed(hubs, tmp_path):
    hf, ms = hubs
    nb = notebook(tmp_path, ms)
    page = ROOT / "docs" / "commands" / "modelscope.md"
    cells = page_cells(page)
    shell = [c for k, c in cells if k == "shell"]
    assert len(shell) >= 12, shell
    hosts = {"https://www.modelscope.cn": ms.url}
    # The page's first three lines, then its Python: found in place, no byte downloaded.
    first = cells[:[k for k, _ in cells].index("python")]
    failed = run_shell_cells(nb, first, hosts, {})
    assert not failed, "modelscope.md lines that fail as typed:\n" + "\n".join(failed)
    one_row_per_repo(page, nb, "ms://Qwen/Qwen2.5-0.5B")  # (its bytes, speed and ETA: test_docs12b_ms_status.py)
    cache = Path(nb.env["HOME"]) / ".cache" / "modelscope"
    assert (cache / "models" / "Qwen--Qwen2.5-0.5B" / "snapshots" / "master" / "model.safetensors").read_bytes() == WEIGHTS

    def fetched():
        return len(ms.file_requests()), ms.cdn.bytes_sent, len(hf.requests)

    before = fetched()
    python = [c for k, c in cells if k == "python"]
    assert len(python) == 1 and "snapshot_download(\"Qwen/Qwen2.5-0.5B\")" in python[0]
    ran = nb.python(python[0] + "\nprint(path)\n")
    assert ran.returncode == 0, str(ran)
    assert Path(ran.stdout.strip().splitlines()[-1]) == cache / "models" / "Qwen--Qwen2.5-0.5B" / "snapshots" / "master"
    assert fetched() == before, "modelscope downloaded a file prefetch had placed"

    rest = cells[len(first) + 1:]
    failed = run_shell_cells(nb, rest, hosts, {})
    assert not failed, "modelscope.md lines that fail as typed:\n" + "\n".join(failed)
    assert (cache / "datasets" / "ORG--NAME" / "snapshots" / "master" / "data" / "train.csv").is_file()
    v1 = cache / "models" / "ORG--NAME" / "snapshots" / "v1.0.0"
    assert sorted(p.relative_to(v1).as_posix() for p in v1.rglob("*") if p.is_file()) == sorted(ORG_NAME)
    assert not (cache / "models" / "ORG--NAME" / "snapshots" / "master").exists()  # `rm ms://ORG/NAME@master`

    before = fetched()
    repos = [("Qwen/Qwen2.5-0.5B", "model", "master", True), ("ORG/NAME", "dataset", "master", True),
             ("ORG/NAME", "model", "v1.0.0", True), ("ORG/NAME", "model", "v1.0.0", False)]
    ran = nb.python(MS_CHECK.format(repos=repos))
    assert ran.returncode == 0, str(ran)
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["model:Qwen/Qwen2.5-0.5B@master:True"] == sorted(QWEN)
    assert out["dataset:ORG/NAME@master:True"] == sorted(DATASET)
    assert out["model:ORG/NAME@v1.0.0:False"] == out["model:ORG/NAME@v1.0.0:True"] == sorted(ORG_NAME)
    assert fetched() == before


def test_hf_page_lfs_from_line_logs_what_the_page_quotes(hubs, tmp_path):
    """The `--lfs-from` line on a cache without the weights: its job's log has the line the page quotes."""
    hf, ms = hubs
    nb = notebook(tmp_path, ms)
    nb.env["HF_ENDPOINT"] = hf.url
    text = (ROOT / "docs" / "commands" / "hf.md").read_text(encoding="utf-8")
    line = next(c for k, c in page_cells(ROOT / "docs" / "commands" / "hf.md") if k == "shell" and "--lfs-from" in c)
    quoted = [" ".join(q.split()) for q in re.findall(r"`(--lfs-from ms://[^`]*)`", text) if "..." not in q]
    assert len(quoted) == 1, quoted
    # The page's numbers stand for this repo's: any count of LFS files, as long as all come from there.
    shape = re.escape(quoted[0]).replace("2\\ of\\ 2", r"(\d+) of (\d+)").replace("2 of 2", r"(\d+) of (\d+)")
    assert r"(\d+)" in shape, quoted[0]
    started = nb.shell(line)
    assert started.returncode == 0, str(started)
    assert nb.shell("prefetch wait").returncode == 0
    cdn_before = ms.cdn.bytes_sent
    log = nb.shell("prefetch log")
    m = re.search(shape, log.stdout + log.stderr)
    assert m and m.group(1) == m.group(2) == "1", log.stdout + log.stderr
    assert ms.cdn.bytes_sent == cdn_before
    snap = hf_cache(nb) / "models--Qwen--Qwen2.5-0.5B" / "snapshots"
    assert (next(snap.iterdir()) / "model.safetensors").read_bytes() == WEIGHTS
