"""Hostile review of `mirror use --tool uv` on a uv.toml that starts with a byte-order mark.

uv reads such a file; prefetch refused it as "not valid TOML". The real uv (the test extra's
``uv`` wheel) then resolves a package from the local index the edited file names.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import run_cli
from mirror_helpers import PKG, Server, build_simple_index, build_wheel, isolate_tool_env, write_user_mirrors

from prefetch.cache.registry import tomllib


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)


def test_a_uv_toml_with_a_bom_is_edited_keeping_the_bom_and_restored(home, env, tmp_path):
    build_simple_index(tmp_path / "index", {PKG: build_wheel(tmp_path / "wheels")})
    server = Server(tmp_path / "index").start()
    try:
        index = f"{server.url}/simple"
        write_user_mirrors(home, f'[mirrors.local]\npypi = "{index}"\n')
        conf = home / ".config" / "uv" / "uv.toml"
        conf.parent.mkdir(parents=True)
        original = "\ufeff# mine\r\n[pip]\r\ngenerate-hashes = false\r\n".encode()
        conf.write_bytes(original)

        done = run_cli("mirror", "use", "local", "--tool", "uv", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        data = conf.read_bytes()
        assert data.startswith(b"\xef\xbb\xbf# mine")
        parsed = tomllib.loads(data.decode("utf-8-sig"))
        assert parsed["pip"] == {"generate-hashes": False}
        assert [i for i in parsed["index"] if i.get("default")] == [{"url": index, "default": True}]
        show = json.loads(run_cli("mirror", "show", "--json", env=env, cwd=tmp_path).stdout)
        assert index in json.dumps(show)
        from uv import find_uv_bin  # the real uv reads the edited file and resolves from the mirror

        (tmp_path / "req.in").write_text(f"{PKG}\n")
        resolved = subprocess.run([find_uv_bin(), "pip", "compile", "--no-cache", "req.in"], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=120)
        assert f"{PKG}==1.0" in resolved.stdout, resolved.stderr
        assert run_cli("mirror", "restore", env=env).returncode == 0
        assert conf.read_bytes() == original
    finally:
        server.stop()
