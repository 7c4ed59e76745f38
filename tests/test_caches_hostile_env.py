"""Where prefetch places and where each real library looks, under the environment variables each honours.

Each side runs in its own fresh interpreter with the same environment: the library's own
answer (huggingface_hub's ``constants``, modelscope-hub's ``HubConfig``, ``nltk.data.path``,
``torch.hub.get_dir``) against prefetch's. A ``~user`` value (a lab's shared folder under
another account's home) was read by prefetch as ``$HOME`` + ``user/...``.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest

ME = pwd.getpwuid(os.getuid()).pw_name

LIBRARY = {
    "hf": "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)",
    "ms": "from modelscope_hub.config import HubConfig; print(HubConfig().cache_dir)",
    "nltk": "import nltk; print(nltk.data.path[0])",
    "torch": "import torch.hub; print(torch.hub.get_dir())",
}
PREFETCH = {
    "hf": "from prefetch.hf.names import hub_cache_root; print(hub_cache_root())",
    "ms": "import os; from prefetch.ms.names import ms_cache_root; print(ms_cache_root(os.environ).absolute())",
    "nltk": "import os; from prefetch.cache.nltk_data import nltk_data_dir; print(nltk_data_dir(os.environ))",
    "torch": "from prefetch.cache.torchvision import torch_hub_dir; print(torch_hub_dir().parent)",
}
CASES = [
    ("hf", {"HF_HOME": f"~{ME}/lab/hf"}),
    ("hf", {"HF_HUB_CACHE": f"~{ME}/lab/hub"}),
    ("hf", {"XDG_CACHE_HOME": f"~{ME}/lab/xdg"}),
    ("hf", {"HF_HOME": "~/hf"}),
    ("hf", {"LAB": "/srv/lab", "HF_HOME": "$LAB/hf"}),
    ("hf", {"HUGGINGFACE_HUB_CACHE": "~/legacy-hub", "HF_HOME": "/srv/hfhome"}),
    ("hf", {"HF_HUB_CACHE": "/srv/a", "HUGGINGFACE_HUB_CACHE": "/srv/b", "HF_HOME": "/srv/c"}),
    ("ms", {"MODELSCOPE_CACHE": f"~{ME}/lab/ms"}),
    ("ms", {"MODELSCOPE_CACHE": "~/ms"}),
    ("nltk", {"NLTK_DATA": f"~{ME}/lab/nltk_data"}),
    ("nltk", {"NLTK_DATA": "~/nltk_data_here" + os.pathsep + "/srv/other"}),
    ("torch", {"TORCH_HOME": f"~{ME}/lab/torch"}),
    ("torch", {"XDG_CACHE_HOME": f"~{ME}/lab/xdg"}),
    ("torch", {"TORCH_HOME": "~/t", "XDG_CACHE_HOME": "/srv/xdg"}),
]
CLEAR = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "MODELSCOPE_CACHE", "NLTK_DATA",
         "TORCH_HOME", "TORCH_HUB")


def answer(code: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=env["HOME"])
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("lib,values", CASES, ids=[f"{lib}-{json.dumps(v)}" for lib, v in CASES])
def test_prefetch_places_where_the_library_looks(home, lib, values):
    env = {k: v for k, v in os.environ.items() if k not in CLEAR}
    env.update(values, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
    theirs, ours = answer(LIBRARY[lib], env), answer(PREFETCH[lib], env)
    if lib == "ms":
        theirs = os.path.realpath(theirs)  # the client resolves links; prefetch writes through the user's own
        ours = os.path.realpath(ours)
    assert ours == theirs
