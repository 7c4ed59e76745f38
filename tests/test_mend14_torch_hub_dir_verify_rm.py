"""``verify`` and ``rm`` with ``--torch-hub`` take ``-P DIR`` as ``get --torch-hub -P DIR`` does
(``torch.hub.set_dir(DIR)``: the checkpoint at ``DIR/checkpoints/<name>``); they looked only in
torch.hub's default dir and refused ``-P`` (no such option). The real torch, its hub dir set to
DIR, reads what ``get`` placed; ``-P`` without ``--torch-hub`` is refused (exit 2)."""

from __future__ import annotations

import hashlib
import json
import os

from tests.conftest import run_cli
from tests.test_layout_hostile12b_torch_hub import _checkpoint
from tests.test_mend13_torch_hub_dir import _torch_reads
from tests.torchvision_synth import CLOSED


def test_verify_and_rm_with_torch_hub_take_P_as_get_does(nginx_origin, home, tmp_path):
    data = _checkpoint(31)
    name = f"tiny-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    (nginx_origin.root / name).write_bytes(data)
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "th"))  # (the default dir: not where -P puts it)
    work = tmp_path / "notebook"
    work.mkdir()
    url = CLOSED + name
    placed = run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, "-P", "hubdir", "-q", env=env, cwd=work)
    assert placed.returncode == 0, placed.stderr
    checkpoint = work / "hubdir" / "checkpoints" / name
    assert _torch_reads(url, work / "hubdir", env)["w"] == [31.0, 32.0, 33.0]

    verified = run_cli("verify", url, "--torch-hub", "-P", "hubdir", "--json", env=env, cwd=work)
    assert verified.returncode == 0, verified.stderr
    rows = json.loads(verified.stdout)
    assert [(r["state"], r["path"]) for r in rows] == [("ok", str(checkpoint))], rows

    dry = run_cli("rm", url, "--torch-hub", "-P", "hubdir", "--dry-run", env=env, cwd=work)
    assert dry.returncode == 0 and checkpoint.exists(), dry.stderr
    removed = run_cli("rm", url, "--torch-hub", "-P", "hubdir", env=env, cwd=work)
    assert removed.returncode == 0, removed.stderr
    assert not checkpoint.exists()
    assert not (tmp_path / "th").exists()
    gone = run_cli("verify", url, "--torch-hub", "-P", "hubdir", env=env, cwd=work)
    assert gone.returncode == 1 and "not on disk" in gone.stdout, gone.stdout

    # Placed again, then a byte changed (no longer the file prefetch placed): verify says so, exit 4.
    again = run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, "-P", "hubdir", "-q", env=env, cwd=work)
    assert again.returncode == 0, again.stderr
    checkpoint.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    changed = run_cli("verify", url, "--torch-hub", "--output-dir", "hubdir", env=env, cwd=work)
    assert changed.returncode == 4 and "mismatch" in changed.stdout, (changed.stdout, changed.stderr)


def test_P_without_torch_hub_is_a_usage_error(home, tmp_path):
    for command in ("verify", "rm"):
        refused = run_cli(command, CLOSED + "tiny-00000000.pth", "-P", "hubdir", cwd=tmp_path)
        assert refused.returncode == 2 and "--torch-hub" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    assert not (tmp_path / "hubdir").exists()

def test_the_apis_remove_takes_output_dir_with_torch_hub(nginx_origin, home, tmp_path):
    import subprocess
    import sys

    data = _checkpoint(41)
    name = f"tiny-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    (nginx_origin.root / name).write_bytes(data)
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "th"))
    url = CLOSED + name
    placed = run_cli("get", url, "--torch-hub", "--mirror", nginx_origin.url, "-P", "hubdir", "-q", env=env,
                     cwd=tmp_path)
    assert placed.returncode == 0, placed.stderr
    checkpoint = tmp_path / "hubdir" / "checkpoints" / name
    assert checkpoint.read_bytes() == data
    code = ("import prefetch, sys\n"
            "try:\n    prefetch.remove(sys.argv[1], output_dir='hubdir')\n"
            "except prefetch.UsageError as exc:\n    print('refused', exc)\n"
            "r = prefetch.remove(sys.argv[1], torch_hub=True, output_dir='hubdir')\n"
            "print('removed', len(r.removed))\n")
    done = subprocess.run([sys.executable, "-c", code, url], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused output_dir" in done.stdout, done.stdout
    assert not checkpoint.exists(), done.stdout
