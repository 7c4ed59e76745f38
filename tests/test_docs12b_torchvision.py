"""docs/commands/torchvision.md runs as typed, and the real torchvision finds what it placed, offline.

The page runs as a notebook (tests/docs_pages.py): each ``!prefetch`` line in page order
through a ``prefetch`` on PATH, in one cwd (so ``./data`` is the notebook's), then its
Python lines with the real torchvision, every socket refused. What the page leaves to the
reader is filled in, and only that:

* the files are synthetic (tests/torchvision_synth.py): a CIFAR-10 archive and a resnet50
  state dict, served by a local nginx. Their hashes are their own, so prefetch learns them the
  way the page's "Your own entries" says: its first TOML block, saved as the config dir's
  ``registry.toml`` from the start (its host ``10.0.0.5`` the nginx, its md5 the archive's),
  plus an entry that replaces torchvision's ``resnet50.IMAGENET1K_V2`` (the ``DEFAULT``) with
  the local file of the same name; the page's second TOML block (``TEAM_V1``) is appended
  where the page shows it, before the lines that use it (its ``...`` the file's sha256, its
  hosts the nginx). In the Python process only, torchvision's md5 table for CIFAR10 is
  given the synthetic archive's md5s (as tests/test_torchvision.py does).
* the resnet50 state dict has every key and shape of ``torchvision.models.resnet50()``, each
  tensor one number broadcast (a few KB, loaded by ``load_state_dict`` as a full one).

Not run: ``get https://download.pytorch.org/models/resnet18-f37072fd.pth --torch-hub``, whose
file must have a sha256 starting with ``f37072fd``: only the real file (the internet) has that.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

from tests import torchvision_synth as synth
from tests.docs_pages import ROOT, Notebook, isolated_env, localize, page_cells, prefetch_on_path
from tests.nginx import NginxServer, nginx_binary

PAGE = ROOT / "docs" / "commands" / "torchvision.md"
NOT_HERE = "prefetch get https://download.pytorch.org/models/resnet18-f37072fd.pth --torch-hub"
DEFAULT_WEIGHTS = "resnet50-11ad3fa6.pth"  # torchvision 0.29's ResNet50_Weights.DEFAULT (IMAGENET1K_V2)


def broadcast_state_dict(model: str) -> bytes:
    import torch
    import torchvision

    with torch.device("meta"):  # (shapes and dtypes only: no 25M random numbers)
        state = getattr(torchvision.models, model)().state_dict()
    small = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) if v.dim() else torch.zeros((), dtype=v.dtype)
             for k, v in state.items()}
    buf = io.BytesIO()
    torch.save(small, buf)
    return buf.getvalue()


LOADER = synth.NO_NETWORK + """
import torch, torchvision
import torchvision.datasets as D
c = json.loads(MD5S)
D.CIFAR10.url = "http://127.0.0.1:9/cifar-10-python.tar.gz"
D.CIFAR10.tgz_md5 = c["cifar-10-python.tar.gz"]
D.CIFAR10.train_list = [[n, c[n]] for n, _ in D.CIFAR10.train_list]
D.CIFAR10.test_list = [[n, c[n]] for n, _ in D.CIFAR10.test_list]
D.CIFAR10.meta = dict(D.CIFAR10.meta, md5=c["batches.meta"])
"""


def test_torchvision_page_runs_as_typed(tmp_path):
    if nginx_binary() is None:
        raise RuntimeError("nginx is not installed: apt-get install nginx (bash tests/run.sh does this)")
    home = tmp_path / "home"
    home.mkdir()
    nb = Notebook(tmp_path / "notebook", isolated_env(home, prefetch_on_path(tmp_path / "bin")))
    nb.cwd.mkdir()
    www = tmp_path / "www"
    (www / "datasets").mkdir(parents=True)
    archive = synth.cifar10_archive()
    (www / "datasets" / "cifar-10-python.tar.gz").write_bytes(archive)
    weights = broadcast_state_dict("resnet50")
    (www / DEFAULT_WEIGHTS).write_bytes(weights)
    (www / "resnet50-team.pth").write_bytes(weights)
    sha = hashlib.sha256(weights).hexdigest()
    md5s = {"cifar-10-python.tar.gz": synth.md5(archive), **{n: synth.md5(d) for n, d in synth.cifar10_members().items()}}

    text = PAGE.read_text(encoding="utf-8")
    own, team = re.findall(r"^```toml\n(.*?)^```", text, re.M | re.S)
    assert "[torchvision.CIFAR10]" in own and 'default = "TEAM_V1"' in team
    cells = page_cells(PAGE)
    shell = [c for k, c in cells if k == "shell"]
    assert len(shell) >= 11 and NOT_HERE in shell, shell
    registry = Path(nb.env["PREFETCH_HOME"]) / "config" / "registry.toml"
    registry.parent.mkdir(parents=True)

    with NginxServer(www) as nginx:
        hosts = {"http://10.0.0.5/": nginx.url_for(""), "https://models.team.example/": nginx.url_for(""),
                 "https://mirror.team.example/": nginx.url_for("")}
        own = localize(own, hosts).replace("c58f30108f718f92721af3b95e74349a", md5s["cifar-10-python.tar.gz"])
        replaced = (f"\n[torchvision.resnet50.weights.IMAGENET1K_V2]\nurls = [\"{nginx.url_for(DEFAULT_WEIGHTS)}\"]\n"
                    f"sha256 = \"{sha}\"\n")
        registry.write_text(own + replaced, encoding="utf-8")
        failed = []
        for kind, code in cells:
            if kind == "python":
                # Laid out as the class checks it before torchvision runs (its download=True would
                # otherwise extract the archive itself, and the page's claim would go unchecked).
                assert (nb.cwd / "data" / "cifar-10-batches-py" / "data_batch_1").is_file(), failed
                ran = nb.python(LOADER.replace("MD5S", repr(json.dumps(md5s))) + code
                                + "\nprint(json.dumps([len(train), sum(p.numel() for p in model.parameters())]))\n")
                if ran.returncode != 0:
                    failed.append(str(ran))
                else:
                    found = json.loads(ran.stdout.strip().splitlines()[-1])
                    assert found[0] == 5 and found[1] > 20_000_000, found  # five one-row batches; resnet50
                continue
            if code == NOT_HERE:
                continue
            if code == "prefetch get torchvision:resnet50" and "TEAM_V1" not in registry.read_text():
                registry.write_text(registry.read_text() + localize(team, hosts).replace('"..."', f'"{sha}"'))
            ran = nb.shell(localize(code, hosts))
            if ran.returncode != 0:
                failed.append(str(ran))
        log = nginx.access_log.read_text()
    assert not failed, "torchvision.md lines that fail as typed:\n" + "\n".join(failed)

    # torch.hub, asked for the page's TEAM_V1 URL as typed, finds the file `get torchvision:resnet50` placed.
    team_url = re.search(r'urls = \["(https://models\.team\.example/[^"]+)"', team).group(1)
    ran = nb.python(synth.NO_NETWORK + f"import torch\nstate = torch.hub.load_state_dict_from_url({team_url!r})\n"
                    "print(json.dumps(len(state)))\n")
    assert ran.returncode == 0 and int(ran.stdout.split()[-1]) > 300, str(ran)
    checkpoints = home / ".cache" / "torch" / "hub" / "checkpoints"
    assert (checkpoints / DEFAULT_WEIGHTS).read_bytes() == weights
    assert (checkpoints / "resnet50-team.pth").read_bytes() == weights  # TEAM_V1, the page's `default`
    data = nb.cwd / "data"
    assert not (data / "cifar-10-python.tar.gz").exists()  # the page's `rm torchvision:CIFAR10 --root ./data`
    assert log.count("cifar-10-python.tar.gz") == 1 and log.count(DEFAULT_WEIGHTS) == 1
