"""Where prefetch places and where each real library looks, under the environment variables each honours.

Each side runs in its own fresh interpreter with the same environment: the library's own
answer (huggingface_hub's ``constants``, modelscope-hub's ``HubConfig``, ``nltk.data.path``,
``torch.hub.get_dir``, the folder Keras's ``get_file`` writes to) against prefetch's. A
``~user`` value (a lab's shared folder under another account's home) was read by prefetch as
``$HOME`` + ``user/...``; a variable set but empty (``%env HF_HOME=``) was read as unset, where
each library uses it: huggingface_hub and torch then use the current directory (``./hub``),
Keras ``/tmp/.keras``; prefetch placed under ``~/.cache`` or ``~/.keras`` and the library
downloaded again.
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
    # Keras's own get_file, up to the download (which prints the folder it would write to, and stops).
    "keras": ("import sys; import keras.src.utils.file_utils as f\n"
              "def stop(url, fpath, *args, **kwargs): print(f.os.path.dirname(fpath)); sys.exit(0)\n"
              "f.urlretrieve = stop\nf.get_file('x.npz', origin='http://127.0.0.1:9/x.npz')"),
}
PREFETCH = {
    "hf": "from prefetch.hf.names import hub_cache_root; print(hub_cache_root())",
    "ms": "import os; from prefetch.ms.names import ms_cache_root; print(ms_cache_root(os.environ).absolute())",
    "nltk": "import os; from prefetch.cache.nltk_data import nltk_data_dir; print(nltk_data_dir(os.environ))",
    "torch": "from prefetch.cache.torchvision import torch_hub_dir; print(torch_hub_dir().parent)",
    "keras": "from prefetch.cache.layout import datasets_dir, keras_root; print(datasets_dir(keras_root()))",
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
    # set but empty: used as each library uses it
    ("hf", {"HF_HOME": ""}),
    ("hf", {"XDG_CACHE_HOME": ""}),
    ("hf", {"HF_HUB_CACHE": "", "HF_HOME": "/srv/c"}),
    ("hf", {"HUGGINGFACE_HUB_CACHE": ""}),
    ("ms", {"MODELSCOPE_CACHE": ""}),
    ("nltk", {"NLTK_DATA": ""}),
    ("torch", {"TORCH_HOME": ""}),
    ("torch", {"XDG_CACHE_HOME": ""}),
    ("keras", {}),
    ("keras", {"KERAS_HOME": ""}),
    ("keras", {"KERAS_HOME": "~/kh"}),  # an existing folder (Keras reads a missing one only once created)
    ("keras", {"KERAS_HOME": "~/a-file/keras"}),  # cannot be created: Keras falls back to /tmp/.keras
]
CLEAR = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "MODELSCOPE_CACHE", "NLTK_DATA",
         "TORCH_HOME", "TORCH_HUB", "KERAS_HOME")


def answer(code: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=env["HOME"])
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.rstrip("\n").split("\n")[-1]  # an empty variable's answer may be an empty line


@pytest.mark.parametrize("lib,values", CASES, ids=[f"{lib}-{json.dumps(v)}" for lib, v in CASES])
def test_prefetch_places_where_the_library_looks(home, lib, values):
    env = {k: v for k, v in os.environ.items() if k not in CLEAR}
    env.update(values, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", KERAS_BACKEND="numpy")
    (home / "a-file").write_text("not a folder")
    (home / "kh").mkdir()
    theirs, ours = answer(LIBRARY[lib], env), answer(PREFETCH[lib], env)
    # Both run in HOME: a relative answer (an empty variable's) is the same folder as its absolute form.
    theirs, ours = (os.path.abspath(os.path.join(env["HOME"], p)) for p in (theirs, ours))
    if lib == "ms":
        theirs = os.path.realpath(theirs)  # the client resolves links; prefetch writes through the user's own
        ours = os.path.realpath(ours)
    assert ours == theirs
