"""Running a docs page as a notebook runs it: its cells in page order (a helper module, not tests).

``page_cells(page)`` reads a page's code blocks in order: each ``!`` line of a ``text`` block
is a shell cell (its ``# comment`` cut off); a ``python`` block is a Python cell, and so are
the Python lines a ``text`` block shows between ``!`` lines (``model = ...``), as typed in a
notebook. ``Notebook`` runs them: shell cells through ``bash`` with a ``prefetch`` on PATH, in
one cwd; Python cells in one fresh interpreter per page, one namespace, in that cwd.
``localize`` maps the hosts a page names onto the local servers (and nothing else).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(text|python|bash)\n(.*?)^```", re.M | re.S)
PYTHON_LINE = re.compile(r"^[A-Za-z_(][\w, ()]*=\s*\S|^(?:import|from) \w")


def page_cells(page: Path) -> list[tuple[str, str]]:
    """(kind, code) in page order: kind "shell" (one ``!`` line) or "python" (a block or a run of lines)."""
    cells: list[tuple[str, str]] = []
    for kind, block in BLOCK.findall(page.read_text(encoding="utf-8")):
        if kind == "python":
            cells.append(("python", block))
            continue
        if kind == "bash":
            continue
        lines: list[str] = []
        for line in block.splitlines():
            if line.startswith("!"):
                if lines:
                    cells.append(("python", "\n".join(lines) + "\n"))
                    lines = []
                cells.append(("shell", re.split(r"\s+#", line[1:])[0].strip()))
            elif PYTHON_LINE.match(line):
                lines.append(re.split(r"\s+#", line)[0].rstrip())
        if lines:
            cells.append(("python", "\n".join(lines) + "\n"))
    return cells


def localize(text: str, hosts: dict[str, str]) -> str:
    """``text`` with each of ``hosts``' keys (a URL or a path the page names) replaced by its value."""
    for name in sorted(hosts, key=len, reverse=True):
        text = text.replace(name, hosts[name])
    return text


def prefetch_on_path(bindir: Path) -> Path:
    """A ``prefetch`` in ``bindir`` that runs this checkout's prefetch with this interpreter."""
    bindir.mkdir(parents=True, exist_ok=True)
    shim = bindir / "prefetch"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m prefetch \"$@\"\n", encoding="utf-8")
    shim.chmod(0o755)
    return bindir


def isolated_env(home: Path, bindir: Path) -> dict[str, str]:
    """An environment as conftest's ``home`` makes it (fresh homes, no proxies, fast retries), module-wide."""
    env = dict(os.environ)
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy",
                "PREFETCH_DATASET_MIRROR", "HF_ENDPOINT", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN",
                "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "IPYTHONDIR", "MODELSCOPE_DOMAIN",
                "MODELSCOPE_API_TOKEN", "MODELSCOPE_CACHE", "MODELSCOPE_ENDPOINT", "NLTK_DATA", "TORCH_HOME",
                "XDG_CACHE_HOME", "NO_COLOR", "FORCE_COLOR", "PREFETCH_PLAIN", "PREFETCH_NOTEBOOK", "JPY_PARENT_PID"):
        env.pop(var, None)
    env.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local" / "state"),
        "KERAS_HOME": str(home / ".keras"), "PREFETCH_HOME": str(home / ".prefetch"),
        "NO_PROXY": "127.0.0.1,localhost,::1", "PREFETCH_BACKOFF": "0.05", "PREFETCH_BACKOFF_CAP": "0.2",
        "PREFETCH_RETRY_AFTER_CAP": "1", "PREFETCH_READ_TIMEOUT": "3", "PREFETCH_CONNECT_TIMEOUT": "3",
        "HF_HUB_DISABLE_TELEMETRY": "1", "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    })
    return env


@dataclass
class Ran:
    kind: str
    code: str
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.code.strip()}\n  exit {self.returncode}\n  {self.stdout[-1500:]}\n  {self.stderr[-1500:]}"


@dataclass
class Notebook:
    """One page's notebook: a cwd and an environment shared by its cells."""

    cwd: Path
    env: dict[str, str]
    ran: list[Ran] = field(default_factory=list)

    def shell(self, line: str, timeout: float = 180) -> Ran:
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=self.cwd, env=self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        ran = Ran("shell", line, proc.returncode, proc.stdout, proc.stderr)
        self.ran.append(ran)
        return ran

    def python(self, code: str, *, env: dict[str, str] | None = None, timeout: float = 300) -> Ran:
        """Run ``code`` (the page's Python cells, joined) in a fresh interpreter in this notebook's cwd."""
        proc = subprocess.run([sys.executable, "-c", code], cwd=self.cwd, env=env or self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        ran = Ran("python", code, proc.returncode, proc.stdout, proc.stderr)
        self.ran.append(ran)
        return ran
