"""Hosted notebooks, tried for real: ``prefetch`` not on the cell's PATH, a kernel restart
mid-job, AutoDL's ``source /etc/network_turbo`` proxy.

``pip install --user`` (a non-root notebook user) puts the ``prefetch`` script in
``~/.local/bin``, often not on a ``!`` cell's PATH: the user types ``python -m prefetch``.
Every command works so (the ``-b`` worker is started by the interpreter, not by the script),
and the commands prefetch suggests (``follow with: ...``, ``continue with ...``, an error's
advice) say ``python -m prefetch`` then, not a ``prefetch`` the shell cannot find.
The kernel test restarts the kernel the way Jupyter does (SIGKILL to its process group):
the job, started with the proxy of the cell that started it (a platform-wide ``no_proxy``
that does not name the server), keeps going through that proxy, and ``wait`` from the new
kernel sees it done. Real processes, a real kernel, a real tinyproxy; no mocks.
The ``pip install --user`` test runs under an externally managed Python (PEP 668) made for it,
wherever the suite runs: it skipped itself where pip refused ``--user`` (Debian's python3).
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import run_cli
from tests.proxies import TinyProxy
from tests.test_jobs import job_id_from

DATA = random.Random(1414).randbytes(1_500_000)
SHA = hashlib.sha256(DATA).hexdigest()
PASSWORD = "turbo-s3cret"
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
               "NO_PROXY")


def python_only_bin(tmp_path: Path) -> Path:
    """A bin dir with a ``python`` (this interpreter) and no ``prefetch``: a ``--user`` install's cell."""
    bindir = tmp_path / "pybin"
    bindir.mkdir()
    wrapper = bindir / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return bindir


def module_env(bindir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PREFETCH_COMMAND", None)  # (conftest's: suggestions as `prefetch` everywhere else)
    env["PATH"] = f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    return env


def python_m(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m prefetch ARGS`` as the cell's shell runs it: ``python`` found on PATH."""
    return subprocess.run(["python", "-m", "prefetch", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_python_m_prefetch_without_the_script_on_path_runs_a_job_and_suggests_what_can_be_typed(home, origin,
                                                                                                 tmp_path):
    origin.put("d.bin", DATA)
    bindir = python_only_bin(tmp_path)
    env = module_env(bindir)
    assert subprocess.run(["sh", "-c", "command -v prefetch"], env=env, capture_output=True).returncode != 0

    started = python_m("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(tmp_path / "data"), "-b", env=env)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    assert (f"follow with: python -m prefetch status {job} | python -m prefetch log -f {job} | "
            f"python -m prefetch wait {job}") in started.stdout
    waited = python_m("wait", job, "--timeout", "60", env=env)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (tmp_path / "data" / "d.bin").read_bytes() == DATA

    # An error's advice too: one line, the command as it can be typed here.
    missing = python_m("resume", "j0000-0000", env=env)
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1
    assert "`python -m prefetch status` lists jobs" in missing.stderr, missing.stderr

    # --help and a usage error name the command so too.
    assert "Usage: python -m prefetch status" in python_m("status", "--help", env=env).stdout
    bad = python_m("status", "--no-such-option", env=env)
    assert bad.returncode == 2 and "(see `python -m prefetch status --help`)" in bad.stderr, bad.stderr

    # PREFETCH_COMMAND overrides the guess.
    told = python_m("resume", "j0000-0000", env=dict(env, PREFETCH_COMMAND="prefetch"))
    assert "no job 'j0000-0000'" in told.stderr and "; `prefetch status` lists jobs" in told.stderr, told.stderr

    # doctor's advice too (internet off: every source fails, the hint names the mirror commands).
    doctor = python_m("doctor", env=dict(env, PREFETCH_RESOLVE="*=fail"))
    assert "`python -m prefetch mirror bench`" in doctor.stdout, doctor.stdout

    # With the script on PATH (or run as the script), the suggestions say `prefetch`.
    script = bindir / "prefetch"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m prefetch "$@"\n')
    script.chmod(0o755)
    again = python_m("get", origin.url_for("d.bin"), "--sha256", SHA, "-P", str(tmp_path / "more"), "-b", env=env)
    assert again.returncode == 0, again.stderr
    job2 = job_id_from(again.stdout)
    assert f"follow with: prefetch status {job2} |" in again.stdout
    assert python_m("wait", job2, "--timeout", "60", env=env).returncode == 0
    assert "`prefetch status` lists jobs" in run_cli("resume", "j0000-0000").stderr


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_job_from_a_turbo_cell_survives_a_kernel_restart_through_its_proxy_and_wait_sees_it(home, origin,
                                                                                             tmp_path):
    from tests.kernel import Kernel, kernel_env

    origin.put("big.bin", DATA)
    origin.total_rate = 200 << 10  # ~7 s: the restart comes mid-download
    bindir = python_only_bin(tmp_path)
    env = kernel_env(home)
    env.pop("PREFETCH_COMMAND", None)
    for var in _PROXY_VARS:
        env.pop(var, None)
    env["PATH"] = f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env["no_proxy"] = "localhost,.autodl.com"  # platform-wide, as AutoDL sets it: not our server
    work = tmp_path / "notebook"
    work.mkdir()
    with TinyProxy(tmp_path / "tinyproxy", user="alice", password=PASSWORD) as proxy:
        turbo = tmp_path / "network_turbo"  # AutoDL's /etc/network_turbo: the cell's shell only
        turbo.write_text(f"export http_proxy={proxy.url_with_credentials}\n"
                         f"export https_proxy={proxy.url_with_credentials}\n")
        final = tmp_path / "data" / "big.bin"
        kernel = Kernel(env, cwd=work)
        try:
            cell = kernel.run(f"!. {turbo} && python -m prefetch get {origin.url_for('big.bin')} "
                              f"--sha256 {SHA} -P {final.parent} -b")
            job = job_id_from(cell.rendered)
            assert f"python -m prefetch wait {job}" in cell.rendered
            pid = int(cell.rendered.split("(pid ", 1)[1].split(")", 1)[0])
            # ... and one from the kernel itself (the Python API): its worker is the kernel's child.
            api = kernel.run(f"import prefetch\njob = prefetch.ensure({origin.url_for('big.bin')!r}, background=True, "
                             f"sha256={SHA!r}, output_dir={str(tmp_path / 'api')!r})\nprint('api job', job.id, job.pid)")
            assert api.error is None, api.error
            api_pid = int(api.rendered.split()[-1])
            deadline = time.monotonic() + 60
            while not any(p.name.endswith(".part") and p.stat().st_size for p in final.parent.glob("*")):
                assert time.monotonic() < deadline, "the job never started writing"
                time.sleep(0.05)

            kernel.km.restart_kernel(now=True)  # SIGKILL to the kernel's process group, as Jupyter does
            kernel.kc.wait_for_ready(timeout=120)
            assert _alive(pid), "the job's worker died with the kernel"
            assert _alive(api_pid), "the API job's worker died with the kernel"
            assert not final.exists()  # (still downloading: the restart came mid-job)

            waited = kernel.run("!python -m prefetch wait; echo rc=$?", timeout=120)
            assert "rc=0" in waited.rendered, waited.rendered
            assert final.read_bytes() == DATA and (tmp_path / "api" / "big.bin").read_bytes() == DATA
            assert "GET http://127.0.0.1" in proxy.log()  # the download went through the cell's proxy
            status = kernel.run(f"!python -m prefetch status {job} --json; python -m prefetch log {job}")
            assert PASSWORD not in status.rendered + cell.rendered + waited.rendered
        finally:
            kernel.shutdown()
    for path in home.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


def externally_managed_python(home: Path) -> Path:
    """A Python installation as a hosted notebook's or Debian's: no venv, PEP 668's marker in its
    standard library (``pip install --user`` refused unless told ``--break-system-packages``), and
    the suite's packages (click, requests, pip, setuptools) among its own, as a platform's system
    packages are. This interpreter's binary runs with ``PYTHONHOME`` at the folder made here (its
    standard library linked entry by entry), whatever runs the suite: a venv (whose base would lack
    the packages), pyenv's Python, Debian's. Returns the folder (the ``PYTHONHOME``)."""
    import site
    import sysconfig

    base = getattr(sys, "_base_executable", sys.executable)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    root = home.parent / "system-python"
    lib = root / sys.platlibdir / f"python{sys.version_info.major}.{sys.version_info.minor}"
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name not in ("site-packages", "dist-packages", "EXTERNALLY-MANAGED"):
            (lib / entry.name).symlink_to(entry)
    (lib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=managed by the platform (a test's)\n")
    asked = subprocess.run([base, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                           text=True, env={**os.environ, "PYTHONHOME": str(root)}, timeout=60)
    assert asked.returncode == 0 and asked.stdout.startswith(str(root)), asked.stdout + asked.stderr
    packages = Path(asked.stdout.strip())
    packages.mkdir(parents=True, exist_ok=True)
    user = site.getusersitepackages()
    suite = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and p != user]
    (packages / "suite.pth").write_text("".join(f"{p}\n" for p in suite))
    return root


def test_a_real_pip_install_user_then_python_m_prefetch_runs_a_job(home, origin, tmp_path):
    """``pip install --user`` as a notebook user does it: the script in ~/.local/bin (not on PATH),
    the package in the user site; ``python -m prefetch`` (the interpreter pip ran under) runs a
    ``-b`` job whose worker imports the same copy. The interpreter is an externally managed one
    (PEP 668, as Debian's and several platforms' are: pip refuses ``--user`` there), so the user
    says ``--break-system-packages``; the test ran, never skipped, wherever the suite runs."""
    import shutil

    base = getattr(sys, "_base_executable", sys.executable)
    worktree = Path(__file__).resolve().parents[1]
    src = tmp_path / "src"
    shutil.copytree(worktree / "prefetch", src / "prefetch", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(worktree / name, src / name)
    bindir = tmp_path / "pybin"
    bindir.mkdir()
    (bindir / "python").write_text(f'#!/bin/sh\nexec "{base}" "$@"\n')
    (bindir / "python").chmod(0o755)
    env = module_env(bindir)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONUSERBASE", None)
    env.pop("PIP_BREAK_SYSTEM_PACKAGES", None)
    env["PYTHONHOME"] = str(externally_managed_python(home))
    install = ["python", "-m", "pip", "install", "-q", "--user", "--no-deps", "--no-build-isolation", "--no-index",
               str(src)]
    refused = subprocess.run(install, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr, refused.stderr
    installed = subprocess.run([*install, "--break-system-packages"], env=env, capture_output=True, text=True,
                               timeout=300, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert (home / ".local" / "bin" / "prefetch").is_file()
    where = subprocess.run(["python", "-c", "import prefetch; print(prefetch.__file__)"], env=env, capture_output=True,
                           text=True, cwd=tmp_path)
    assert where.stdout.startswith(str(home / ".local")), where.stdout + where.stderr

    origin.put("u.bin", DATA)
    started = python_m("get", origin.url_for("u.bin"), "--sha256", SHA, "-P", str(tmp_path / "data"), "-b", env=env)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    assert f"python -m prefetch wait {job}" in started.stdout
    waited = python_m("wait", job, "--timeout", "60", env=env)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (tmp_path / "data" / "u.bin").read_bytes() == DATA
