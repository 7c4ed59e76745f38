"""Hostile review of `mirror use --tool conda` on odd ~/.condarc files.

conda reads .condarc with ruamel.yaml (typ="safe"), which refuses a duplicate key
(DuplicateKeyError: conda then cannot read its config at all). The file is read back with
ruamel.yaml as conda reads it, and duplicates are also looked for on PyYAML's node tree
(same YAML grammar: a BOM is skipped, "channels" and channels are one key).
"""

from __future__ import annotations

import pytest
import yaml
from conftest import run_cli
from mirror_helpers import isolate_tool_env

TUNA = "https://mirrors.tuna.tsinghua.edu.cn/anaconda"


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)


def _top_level_keys(text: str) -> list[str]:
    node = yaml.compose(text)
    return [key.value for key, _ in node.value]


def _use_tuna(home, env, original: bytes) -> str:
    """``mirror use tuna --tool conda`` on a .condarc holding ``original``: the file's text
    after, checked to have no top-level key twice (conda would refuse the whole file)."""
    condarc = home / ".condarc"
    condarc.write_bytes(original)
    done = run_cli("mirror", "use", "tuna", "--tool", "conda", env=env)
    assert done.returncode == 0, done.stderr
    text = condarc.read_bytes().decode("utf-8")
    keys = _top_level_keys(text)
    assert len(keys) == len(set(keys)), keys
    return text


@pytest.mark.parametrize(
    "original, channels",
    [
        (b"\xef\xbb\xbfchannels:\n  - conda-forge\ndefault_channels:\n  - https://old/pkgs/main\n", ["conda-forge"]),
        (b'"channels": [conda-forge]\r\n"default_channels": [https://old/pkgs/main]\r\n', ["conda-forge"]),
        (b"'show_channel_urls': false\n", ["defaults"]),
    ],
)
def test_condarc_with_a_bom_or_quoted_keys_gets_no_duplicate_key(home, env, original, channels):
    condarc = home / ".condarc"
    text = _use_tuna(home, env, original)
    data = yaml.safe_load(text)
    assert data["channels"] == channels and data["default_channels"][0] == f"{TUNA}/pkgs/main"
    assert data["show_channel_urls"] is True
    from ruamel.yaml import YAML  # conda's own reader: a duplicate key is DuplicateKeyError

    assert YAML(typ="safe", pure=True).load(text)["channels"] == channels
    show = run_cli("mirror", "show", "--json", env=env)
    assert TUNA in show.stdout, show.stdout
    assert run_cli("mirror", "restore", env=env).returncode == 0
    assert condarc.read_bytes() == original


@pytest.mark.parametrize(
    "original",
    [
        b"default_channels: [\n  https://old/pkgs/main,\n  https://old/pkgs/r\n]\nchannels:\n  - defaults\n"
        b"custom_channels: {\n  bioconda: https://x/cloud,\n  mine: https://y/cloud\n}\nssl_verify: true\n",
        b"custom_channels: {bioconda: https://x/cloud, mine: https://y/cloud}  # on one line\r\nssl_verify: true\r\n",
    ],
)
def test_multi_line_flow_collections_are_replaced_whole(home, env, original):
    """A `key: [` ... `]` list with the bracket back at column 0 was cut after its first line:
    the lone `]` and `}` stayed behind and conda could not parse the file."""
    condarc = home / ".condarc"
    text = _use_tuna(home, env, original)
    data = yaml.safe_load(text)
    assert data["ssl_verify"] is True and data["default_channels"][0] == f"{TUNA}/pkgs/main"
    assert data["custom_channels"] == {
        "conda-forge": f"{TUNA}/cloud", "pytorch": f"{TUNA}/cloud",
        "bioconda": "https://x/cloud", "mine": "https://y/cloud",
    }
    assert run_cli("mirror", "restore", env=env).returncode == 0
    assert condarc.read_bytes() == original
