"""A second account (uid 65534, a real process) runs prefetch on shared caches the first one
(root here) filled: torch.hub's checkpoints and nltk_data. It reads what is there (exit 0, the
files neither rewritten nor touched), and where it would have to write into the other account's
folder it says so in one line, exit 5, no traceback, and writes nothing.

The interpreter running the suite may live where the second account cannot go (pyenv under
/root, 0700), and so may the checkout: the second account runs the first interpreter of the
same version it can run (this one, else the system's python3.X), with PYTHONPATH at a copy of
this checkout's prefetch and of its pure-Python dependencies under /tmp."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.nltk_origin import write_gh_pages
from tests.torchvision_synth import CLOSED

OTHER = 65534
CANDIDATES = (sys.executable, f"/usr/bin/python3.{sys.version_info.minor}", "/usr/bin/python3")
DEPENDENCIES = ("click", "requests", "urllib3", "certifi", "idna", "charset_normalizer", "tqdm", "filelock",
                "platformdirs", "tomlkit")
WORKTREE = Path(__file__).resolve().parents[1]
PYTHON: list[str] = []  # the interpreter the second account runs (found by other_python)


def _runs_as_other(python: str) -> bool:
    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        done = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                              text=True, timeout=60, cwd="/", stdin=subprocess.DEVNULL, preexec_fn=_drop)
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip() == want


@pytest.fixture(scope="module")
def other_python():
    if os.geteuid() != 0:
        pytest.skip("a second account needs root to become it")
    found = next((p for p in CANDIDATES if os.access(p, os.X_OK) and _runs_as_other(p)), None)
    if found is None:
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} the second account can run")
    PYTHON[:] = [found]
    deps = Path(tempfile.mkdtemp(prefix="prefetch-deps-", dir="/tmp"))
    os.chmod(deps, 0o755)
    shutil.copytree(WORKTREE / "prefetch", deps / "prefetch", ignore=shutil.ignore_patterns("__pycache__"))
    import importlib

    for name in DEPENDENCIES:
        module = importlib.import_module(name)
        shutil.copytree(Path(module.__file__).parent, deps / name)
    yield deps
    shutil.rmtree(deps, ignore_errors=True)


def _drop() -> None:
    os.setgroups([])
    os.setgid(OTHER)
    os.setuid(OTHER)


def as_other(deps: Path, other_home: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    env = dict(env, HOME=str(other_home), PREFETCH_HOME=str(other_home / ".prefetch"),
               XDG_CONFIG_HOME=str(other_home / ".config"), XDG_STATE_HOME=str(other_home / ".state"),
               KERAS_HOME=str(other_home / ".keras"), PYTHONPATH=str(deps), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([PYTHON[0], "-m", "prefetch", *args], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(other_home), stdin=subprocess.DEVNULL, preexec_fn=_drop)


def _snapshot(root: Path) -> dict[str, tuple]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size, p.stat().st_uid)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def places(tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="prefetch-filled-", dir="/tmp"))
    os.chmod(shared, 0o755)  # the first account's, readable by all, writable by it alone
    other_home = Path(tempfile.mkdtemp(prefix="prefetch-other-", dir="/tmp"))
    os.chown(other_home, OTHER, OTHER)
    yield shared, other_home
    shutil.rmtree(shared, ignore_errors=True)
    shutil.rmtree(other_home, ignore_errors=True)


def _one_line_exit_5(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 5, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("prefetch: error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def _checkpoint(seed: int) -> tuple[str, bytes]:
    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.arange(seed, seed + 2, dtype=torch.float32)}, buf)
    data = buf.getvalue()
    return f"m{seed}-{hashlib.sha256(data).hexdigest()[:8]}.pth", data


def test_torch_hub_checkpoints_another_account_filled(other_python, places, nginx_origin, home):
    shared, other_home = places
    (name, data), (new, new_data) = _checkpoint(1), _checkpoint(2)
    (nginx_origin.root / name).write_bytes(data)
    (nginx_origin.root / new).write_bytes(new_data)
    env = dict(os.environ, TORCH_HOME=str(shared / "torch"))
    first = run_cli("get", CLOSED + name, "--torch-hub", "--mirror", nginx_origin.url, env=env)
    assert first.returncode == 0, first.stderr
    before = _snapshot(shared)
    read = as_other(other_python, other_home, "get", CLOSED + name, "--torch-hub", "--mirror", nginx_origin.url,
                    env=env)
    assert read.returncode == 0, (read.stdout, read.stderr)
    assert _snapshot(shared) == before  # read, not rewritten or touched
    refused = as_other(other_python, other_home, "get", CLOSED + new, "--torch-hub", "--mirror", nginx_origin.url,
                       env=env)
    line = _one_line_exit_5(refused)
    assert str(shared / "torch" / "hub" / "checkpoints") in line, line
    assert _snapshot(shared) == before


def test_nltk_data_another_account_filled(other_python, places, nginx_origin, home):
    shared, other_home = places
    write_gh_pages(nginx_origin.root)
    env = dict(os.environ, NLTK_DATA=str(shared / "nltk_data"))
    first = run_cli("get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for(""), env=env)
    assert first.returncode == 0, first.stderr
    before = _snapshot(shared)
    read = as_other(other_python, other_home, "get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for(""), env=env)
    assert read.returncode == 0, (read.stdout, read.stderr)
    assert _snapshot(shared) == before
    refused = as_other(other_python, other_home, "get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""),
                       env=env)
    line = _one_line_exit_5(refused)
    assert str(shared / "nltk_data") in line, line
    assert _snapshot(shared) == before


def test_another_accounts_tree_that_differs_from_its_archive_is_not_taken(other_python, places, nginx_origin, home):
    shared, other_home = places
    write_gh_pages(nginx_origin.root)
    env = dict(os.environ, NLTK_DATA=str(shared / "nltk_data"))
    first = run_cli("get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for(""), env=env)
    assert first.returncode == 0, first.stderr
    victim = next(p for p in sorted((shared / "nltk_data" / "tokenizers" / "punkt_tab").rglob("*")) if p.is_file())
    data = victim.read_bytes()
    victim.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, one bit flipped: not the archive's
    before = _snapshot(shared)
    refused = as_other(other_python, other_home, "get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for(""),
                       env=env)
    _one_line_exit_5(refused)  # it would have to extract again, into the other account's folder
    assert _snapshot(shared) == before


def test_an_hf_cache_another_account_filled(other_python, places, home, monkeypatch):
    from tests.hub_origin import HubServer

    shared, other_home = places
    with HubServer() as hub:
        hub.add_repo("acme/tiny", {"config.json": b'{"a": 1}\n', "model.bin": os.urandom(200_000)},
                     lfs={"model.bin"})
        hub.add_repo("acme/other", {"config.json": b'{"b": 2}\n'})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
        env.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(shared / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
        first = run_cli("get", "hf://acme/tiny", env=env)
        assert first.returncode == 0, first.stderr
        before = _snapshot(shared)
        read = as_other(other_python, other_home, "get", "hf://acme/tiny", env=env)
        assert read.returncode == 0, (read.stdout, read.stderr)
        assert _snapshot(shared) == before  # read, not rewritten or touched
        refused = as_other(other_python, other_home, "get", "hf://acme/other", env=env)
        line = _one_line_exit_5(refused)
        assert str(shared / "hf") in line, line
        assert _snapshot(shared) == before
