"""`mirror use --tool hf` where the notebook platform already exports HF_ENDPOINT (AutoDL, PAI...).

A real IPython started the way a new kernel is (it runs the startup file prefetch wrote), with
the inherited HF_ENDPOINT in its environment, and huggingface_hub reading it at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import run_cli
from mirror_helpers import isolate_tool_env

INHERITED = "https://huggingface.co"
MIRROR = "https://hf-mirror.com"


def _new_kernel_endpoint(home, env: dict) -> str:
    """What huggingface_hub reads in a new IPython (startup files run), HF_ENDPOINT inherited."""
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--ipython-dir", str(home / ".ipython"), "--no-banner", "-c",
         "import huggingface_hub.constants as c; print('ENDPOINT=' + c.ENDPOINT)"],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith("ENDPOINT=")).split("=", 1)[1]


def _new_shell_endpoint(home, env: dict) -> str:
    done = subprocess.run(["bash", "-c", f"source {home / '.bashrc'}; echo $HF_ENDPOINT"],
                          capture_output=True, text=True, timeout=60, env=env)
    return done.stdout.strip()


def test_new_kernels_get_the_mirror_even_when_the_platform_exports_hf_endpoint(home, monkeypatch):
    env = isolate_tool_env(monkeypatch, home)
    env["HF_ENDPOINT"] = INHERITED  # exported by the platform to every kernel and shell
    done = run_cli("mirror", "use", "hf-mirror", "--tool", "hf", env=env)
    assert done.returncode == 0, done.stderr
    # one warning line: this process keeps the inherited value, new kernels and shells do not
    lines = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(lines) == 1 and INHERITED in lines[0] and "%env HF_ENDPOINT=" + MIRROR in lines[0], done.stderr
    said = done.stdout + done.stderr  # ... and that advice once, not again as a note
    assert said.count("%env HF_ENDPOINT=" + MIRROR) == 1, said

    assert _new_shell_endpoint(home, env) == MIRROR
    assert _new_kernel_endpoint(home, env) == MIRROR  # what `mirror use` promised

    shown = json.loads(run_cli("mirror", "show", "--json", env=env).stdout)
    assert shown["hf"]["persisted"] == MIRROR and shown["hf"]["current"] == INHERITED

    run_cli("mirror", "restore", env=env)
    assert _new_kernel_endpoint(home, env) == INHERITED  # the startup file is gone again
    env.pop("HF_ENDPOINT")
    assert _new_kernel_endpoint(home, env) == "https://huggingface.co"


def test_show_reads_a_startup_file_an_older_prefetch_wrote(home, monkeypatch):
    """Before this sitting the file said ``os.environ.setdefault(...)``: an inherited value won."""
    env = isolate_tool_env(monkeypatch, home)
    startup = home / ".ipython" / "profile_default" / "startup" / "00-prefetch-hf-endpoint.py"
    startup.parent.mkdir(parents=True)
    startup.write_text(f"import os\n\nos.environ.setdefault(\"HF_ENDPOINT\", {MIRROR!r})\n")
    shown = json.loads(run_cli("mirror", "show", "--json", env=env).stdout)
    assert shown["hf"]["persisted"] == MIRROR
    env["HF_ENDPOINT"] = INHERITED
    shown = json.loads(run_cli("mirror", "show", "--json", env=env).stdout)
    hf_row = next(t for t in shown["tools"] if t["tool"] == "hf")
    assert _new_kernel_endpoint(home, env) == INHERITED
    assert MIRROR not in hf_row["detail"], hf_row  # never "new kernels get the mirror": they do not
    assert os.path.exists(startup)


def test_with_no_inherited_endpoint_the_note_says_what_a_running_kernel_needs(home, monkeypatch):
    env = isolate_tool_env(monkeypatch, home)
    env.pop("HF_ENDPOINT", None)
    done = run_cli("mirror", "use", "hf-mirror", "--tool", "hf", env=env)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    assert (done.stdout + done.stderr).count("%env HF_ENDPOINT=" + MIRROR) == 1, done.stdout + done.stderr
