"""Which index real uv uses inside a project: a pyproject.toml without [tool.uv] (a cloned repo)
is skipped by uv, which goes on to the uv.toml above it. `mirror show` and `mirror use` must
name that one, as uv resolves from it. Real uv, a real local index on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess

from conftest import run_cli
from mirror_helpers import PKG, Server, build_simple_index, build_wheel, closed_port_url, isolate_tool_env, write_user_mirrors


def test_a_pyproject_without_tool_uv_does_not_hide_the_uv_toml_above_it(home, monkeypatch, tmp_path):
    env = isolate_tool_env(monkeypatch, home)
    build_simple_index(tmp_path / "index", {PKG: build_wheel(tmp_path / "wheels")})
    server = Server(tmp_path / "index").start()
    try:
        project_index = f"{server.url}/simple"
        outer = tmp_path / "work"
        repo = outer / "repo"
        repo.mkdir(parents=True)
        (outer / "uv.toml").write_text(f'[[index]]\nurl = "{project_index}"\ndefault = true\n')
        (repo / "pyproject.toml").write_text('[project]\nname = "repo"\nversion = "0"\n')  # no [tool.uv]
        (repo / "req.in").write_text(f"{PKG}\n")
        write_user_mirrors(home, f'[mirrors.other]\npypi = "{closed_port_url()}/simple"\n')

        done = run_cli("mirror", "use", "other", "--tool", "uv", env=env, cwd=repo)
        assert done.returncode == 0, done.stderr
        assert str(outer / "uv.toml") in done.stderr and project_index in done.stderr, done.stderr

        from uv import find_uv_bin  # the real uv: resolves from the outer uv.toml, not the user file

        resolved = subprocess.run([find_uv_bin(), "pip", "compile", "--no-cache", "req.in"], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=120)
        assert f"{PKG}==1.0" in resolved.stdout, resolved.stderr

        shown = json.loads(run_cli("mirror", "show", "--json", env=env, cwd=repo).stdout)
        uv_row = next(t for t in shown["tools"] if t["tool"] == "uv")
        assert uv_row["url"] == project_index and uv_row["source"] == str(outer / "uv.toml"), uv_row
    finally:
        server.stop()
