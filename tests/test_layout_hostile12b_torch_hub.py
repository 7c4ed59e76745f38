"""torch.hub's checkpoints attacked with the real torch: prefetch places, torch reads offline
(the URL's port is closed; the bytes come from an nginx on 127.0.0.1 through --mirror).

* check_hash=True: the sha256 prefix in the name, found as torch finds it (HASH_REGEX searched:
  its first match, several dots, an empty or upper-case group), is checked by prefetch exactly
  as torch's own download checks it: the same names refused, the same placed.
* where: TORCH_HOME over XDG_CACHE_HOME over ~/.cache, as torch.hub.get_dir; model_dir= is -P.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.torchvision_synth import CLOSED

JUDGE = r"""
import json, sys, torch.hub
out = {}
for url, model_dir in json.loads(sys.argv[1]):
    try:
        sd = torch.hub.load_state_dict_from_url(url, model_dir=model_dir, check_hash=True, progress=False)
        out[url] = "ok:" + ",".join(str(x) for x in sd["w"].tolist())
    except RuntimeError as exc:
        out[url] = "refused:" + str(exc).split(":")[0]
out["get_dir"] = torch.hub.get_dir()
print(json.dumps(out))
"""


def _checkpoint(seed: int) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.arange(seed, seed + 3, dtype=torch.float32)}, buf)
    return buf.getvalue()


def _torch(pairs, env, cwd) -> dict:
    proc = subprocess.run([sys.executable, "-c", JUDGE, json.dumps(pairs)], capture_output=True, text=True,
                          timeout=280, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _names(data: bytes) -> list[str]:
    digest = hashlib.sha256(data).hexdigest()
    wrong = "".join("0" if c != "0" else "1" for c in digest[:8])
    return [
        f"tiny-{digest[:8]}.pth",
        f"my.model.v2-{digest[:10]}.pth",  # several dots before the prefix
        f"net-{digest[:8]}.tar.pth",  # and after it
        f"a-b-{digest[:8]}.pth",  # "-b-" is no match: the prefix is the next one
        f"net-{wrong}.pth",  # a prefix the bytes do not have
        f"net-ab.v2-{digest[:8]}.pth",  # torch takes the FIRST match: "ab"
        f"net-{digest[:8].upper()}.pth",  # upper case: no match, not checked
        "net-.pth",  # an empty prefix: torch checks nothing
    ]


def test_check_hash_names_prefetch_and_torch_agree_and_torch_reads_offline(nginx_origin, home, tmp_path):
    data = _checkpoint(5)
    names = _names(data)
    for name in names:
        (nginx_origin.root / name).write_bytes(data)
    env = dict(os.environ, TORCH_HOME=str(tmp_path / "th"))
    # torch's own verdict: its download (from the nginx on 127.0.0.1) into a model_dir of its own
    theirs = _torch([[nginx_origin.url + n, str(tmp_path / "torch-own")] for n in names], env, tmp_path)
    checkpoints = tmp_path / "th" / "hub" / "checkpoints"
    placed_ok = []
    for name in names:
        proc = run_cli("get", CLOSED + name, "--torch-hub", "--mirror", nginx_origin.url, "-q", env=env)
        verdict = theirs[nginx_origin.url + name]
        if verdict.startswith("ok:"):
            assert proc.returncode == 0, (name, verdict, proc.stderr)
            assert (checkpoints / name).read_bytes() == data
            placed_ok.append(name)
        else:
            assert proc.returncode == 4, (name, verdict, proc.returncode, proc.stderr)
            assert not (checkpoints / name).exists(), name
    assert len(placed_ok) >= 5 and len(placed_ok) < len(names), (placed_ok, theirs)
    mine = _torch([[CLOSED + n, None] for n in placed_ok], env, tmp_path)  # offline: the port is closed
    for name in placed_ok:
        assert mine[CLOSED + name] == "ok:5.0,6.0,7.0", (name, mine)


def test_torch_home_over_xdg_cache_home_over_home_cache_and_model_dir(nginx_origin, home, tmp_path):
    data = _checkpoint(1)
    name = f"w-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    (nginx_origin.root / name).write_bytes(data)
    base = {k: v for k, v in os.environ.items() if k not in ("TORCH_HOME", "XDG_CACHE_HOME")}
    cases = {
        "both": dict(base, TORCH_HOME=str(tmp_path / "th"), XDG_CACHE_HOME=str(tmp_path / "xdg")),
        "xdg": dict(base, XDG_CACHE_HOME=str(tmp_path / "xdg2")),
        "home": dict(base),
        "relative": dict(base, XDG_CACHE_HOME="rel-cache"),
    }
    cwd = tmp_path / "nb"
    cwd.mkdir()
    for label, env in cases.items():
        proc = run_cli("get", CLOSED + name, "--torch-hub", "--mirror", nginx_origin.url, "-q", env=env, cwd=cwd)
        assert proc.returncode == 0, (label, proc.stderr)
        got = _torch([[CLOSED + name, None]], env, cwd)
        assert got[CLOSED + name] == "ok:1.0,2.0,3.0", (label, got)
        hub = got["get_dir"]
        placed = (cwd / hub if not os.path.isabs(hub) else __import__("pathlib").Path(hub)) / "checkpoints" / name
        assert placed.read_bytes() == data, (label, hub)
    assert not (tmp_path / "xdg" / "torch").exists()  # TORCH_HOME won over XDG_CACHE_HOME
    # model_dir=: the file in that folder is what torch reads (-P DIR)
    model_dir = tmp_path / "models"
    proc = run_cli("get", nginx_origin.url + name, "-P", str(model_dir), "-q")
    assert proc.returncode == 0, proc.stderr
    env = dict(base, TORCH_HOME=str(tmp_path / "empty-th"))
    got = _torch([[CLOSED + name, str(model_dir)]], env, tmp_path)
    assert got[CLOSED + name] == "ok:1.0,2.0,3.0", got
