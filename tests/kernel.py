"""A real Jupyter kernel for tests: run cells as a user types them, see what Jupyter shows.

``Kernel`` starts ipykernel through jupyter_client's ``KernelManager`` with the test's
HOME, KERAS_HOME and PREFETCH_HOME, and a PATH where ``prefetch`` is found, then runs
cells (``!prefetch status``, ``import prefetch; ...``) and collects every output
message. ``rendered`` turns a cell's stream into the text Jupyter's output area shows:
``\\r`` overwrites applied, ANSI escapes stripped.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def render_stream(text: str) -> str:
    """What Jupyter shows for stream text: per line, only what follows the last ``\\r``; no ANSI."""
    text = ANSI.sub("", text).replace("\r\n", "\n")
    return "\n".join(line.split("\r")[-1] for line in text.split("\n"))


@dataclass
class Cell:
    """One executed cell: its output messages, in order, with their arrival times."""

    code: str
    started: float
    ended: float | None = None
    streams: list[tuple[float, str, str]] = field(default_factory=list)  # (time, name, text)
    displays: list[dict] = field(default_factory=list)  # display_data / update_display_data / execute_result
    error: dict | None = None  # ename, evalue, traceback

    @property
    def raw(self) -> str:
        return "".join(text for _, _, text in self.streams)

    @property
    def rendered(self) -> str:
        """As Jupyter shows it: consecutive messages of one stream form one output, rendered."""
        blocks: list[tuple[str, str]] = []
        for _, name, text in self.streams:
            if blocks and blocks[-1][0] == name:
                blocks[-1] = (name, blocks[-1][1] + text)
            else:
                blocks.append((name, text))
        return "\n".join(render_stream(text).rstrip("\n") for _, text in blocks)

    @property
    def lines(self) -> list[str]:
        return [line for line in self.rendered.split("\n") if line.strip()]

    @property
    def duration(self) -> float:
        return (self.ended or time.monotonic()) - self.started


class Kernel:
    """A running ipykernel; always ``shutdown()`` it (the fixture does, even when a test fails)."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=env, cwd=str(cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        self.pending: Cell | None = None
        self.msg_id: str | None = None

    def start(self, code: str) -> Cell:
        """Send a cell without waiting for it (``finish`` collects it)."""
        self.pending = Cell(code=code, started=time.monotonic())
        self.msg_id = self.kc.execute(code, store_history=True)
        return self.pending

    def poll(self, cell: Cell, timeout: float = 0.1) -> bool:
        """Collect the messages that arrived; True once the cell has finished."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.kc.get_iopub_msg(timeout=max(0.01, left))
            except queue.Empty:
                return cell.ended is not None
            if msg["parent_header"].get("msg_id") != self.msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            now = time.monotonic()
            if kind == "stream":
                cell.streams.append((now, content["name"], content["text"]))
            elif kind in ("display_data", "update_display_data", "execute_result"):
                cell.displays.append({"type": kind, **content})
            elif kind == "error":
                cell.error = content
            elif kind == "status" and content["execution_state"] == "idle":
                cell.ended = now
                return True
            if time.monotonic() >= deadline:
                return cell.ended is not None

    def finish(self, cell: Cell, timeout: float = 180) -> Cell:
        deadline = time.monotonic() + timeout
        while not self.poll(cell, timeout=0.5):
            if time.monotonic() > deadline:
                raise AssertionError(f"cell did not finish within {timeout}s: {cell.code!r}\n{cell.rendered[-2000:]}")
        return cell

    def run(self, code: str, timeout: float = 180) -> Cell:
        """Run a cell to its end."""
        return self.finish(self.start(code), timeout=timeout)

    def interrupt(self) -> None:
        """The notebook's stop button: SIGINT to the kernel."""
        self.km.interrupt_kernel()

    def shutdown(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)


def kernel_env(home: Path) -> dict[str, str]:
    """This process's environment (the test's homes, PYTHONPATH) with the python's bin dir on PATH."""
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    for var in ("NO_COLOR", "PREFETCH_PLAIN", "PREFETCH_NOTEBOOK", "FORCE_COLOR", "JPY_PARENT_PID"):
        env.pop(var, None)
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    # IPython runs a ! line in $SHELL, else sh: pin it, so a cell runs in the same shell here and in CI
    # (whose root shell sets no SHELL), and in the harder one (dash: no `source`, no bash-isms)
    env["SHELL"] = "/bin/sh"
    return env
