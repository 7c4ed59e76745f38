"""Commands that send no request never import requests (start-up time in a notebook cell).

Each command runs in a real subprocess through the same entry point as ``prefetch``;
at exit the process writes which of the heavy modules it had imported.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer

HEAVY = ("requests", "urllib3", "rich", "tqdm")
DRIVER = """\
import atexit, sys
atexit.register(lambda: sys.stderr.write("\\nIMPORTED=" + ",".join(m for m in {heavy!r} if m in sys.modules) + "\\n"))
sys.argv[0] = "prefetch"
from prefetch.cli import main
main()
"""


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-c", DRIVER.format(heavy=HEAVY), *args], capture_output=True,
                          text=True, timeout=120, env=os.environ.copy(), stdin=subprocess.DEVNULL)
    line = [x for x in proc.stderr.splitlines() if x.startswith("IMPORTED=")]
    assert line, proc.stderr
    return {m for m in line[-1].removeprefix("IMPORTED=").split(",") if m}, proc


@pytest.mark.parametrize("args", [["--help"], ["status"], ["list"], ["wait"], ["log"]])
def test_commands_without_requests_never_import_it(home, args):
    modules, _ = imported(*args)
    assert "requests" not in modules and "urllib3" not in modules


def test_a_get_that_finds_everything_cached_never_imports_requests(home, tmp_path):
    data = os.urandom(100_000)
    sha = hashlib.sha256(data).hexdigest()
    out = tmp_path / "d.bin"
    with OriginServer() as origin:
        origin.put("d.bin", data)
        url = origin.url_for("d.bin")
        first = run_cli("get", url, "-o", str(out), "--sha256", sha, "-q")
        assert first.returncode == 0, first.stderr
        modules, proc = imported("get", url, "-o", str(out), "--sha256", sha, "-q")
        assert proc.returncode == 0, proc.stderr
        assert len(origin.data_requests("d.bin")) == 1  # the second get sent nothing
    assert "requests" not in modules and "urllib3" not in modules
    # ... while a get that downloads does import it (the check above can fail).
    out.unlink()
    with OriginServer() as origin:
        origin.put("d.bin", data)
        modules, proc = imported("get", origin.url_for("d.bin"), "-o", str(out), "--sha256", sha, "-q")
    assert proc.returncode == 0, proc.stderr
    assert "requests" in modules


PLANNER_TABLES = ("tomllib", "prefetch.cache.registry", "prefetch.cache.nltk_data", "prefetch.cache.torchvision",
                  "prefetch.hf.names", "prefetch.ms.names", "prefetch.ui.style")


def test_a_get_of_a_url_never_loads_the_other_kinds_tables(home, tmp_path):
    """Each kind's tables (the dataset registry's TOML, NLTK's snapshot, torchvision's) and
    name modules (hf://, ms://) load where a name of that kind is planned, not at the start
    of every ``get``; a quiet ``get`` never loads the terminal styles."""
    data = os.urandom(10_000)
    out = tmp_path / "u.bin"
    with OriginServer() as origin:
        origin.put("u.bin", data)
        proc = subprocess.run([sys.executable, "-c", DRIVER.format(heavy=PLANNER_TABLES), "get",
                               origin.url_for("u.bin"), "-o", str(out), "-q"],
                              capture_output=True, text=True, timeout=120, env=os.environ.copy(),
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    line = [x for x in proc.stderr.splitlines() if x.startswith("IMPORTED=")]
    assert line == ["IMPORTED="], proc.stderr
