"""A notebook or shell whose current directory was removed (a temporary folder cleaned away
under a running kernel) can still fetch to an absolute place: ``get URL -o /abs/file`` and
``get_file(..., cache_dir="/abs")`` need no current directory (a real origin on 127.0.0.1).

``get_file`` looked at each level of its folder from ``os.getcwd()`` (506c8d8, the planted-link
check): with the directory gone, a bare ``FileNotFoundError`` ("No such file or directory")
came out of it, not one of prefetch's errors. And the URL planner asked for the current
directory even for an absolute ``-o``/``out=``: "the current directory was removed: cd to one
that exists, or give absolute paths (-P DIR, -o FILE)" to a user who had given ``-o /abs``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from tests.origin import OriginServer

DATA = random.Random(1919).randbytes(40_000)


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("d.bin", DATA)
        yield server


def _in_removed_dir(tmp_path, argv: list[str]) -> subprocess.CompletedProcess:
    gone = tmp_path / "gone"
    gone.mkdir()
    return subprocess.run(argv, cwd=gone, preexec_fn=lambda: os.rmdir(gone),  # (after the child's chdir)
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_get_with_an_absolute_output_from_a_removed_directory(origin, home, tmp_path):
    out = tmp_path / "data" / "d.bin"
    got = _in_removed_dir(tmp_path, [sys.executable, "-m", "prefetch", "get", origin.url_for("d.bin"), "-o", str(out)])
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == DATA


def test_get_file_with_an_absolute_cache_dir_from_a_removed_directory(origin, home, tmp_path):
    (tmp_path / "keras").mkdir()  # (as Keras, a cache_dir it may not write is /tmp/.keras instead)
    script = (f"import prefetch; print(prefetch.get_file('d.bin', origin={origin.url_for('d.bin')!r}, "
              f"cache_dir={str(tmp_path / 'keras')!r}, progress=False))")
    got = _in_removed_dir(tmp_path, [sys.executable, "-c", script])
    assert got.returncode == 0, got.stderr
    assert "Traceback" not in got.stderr
    assert (tmp_path / "keras" / "datasets" / "d.bin").read_bytes() == DATA


def test_a_background_get_with_an_absolute_output_from_a_removed_directory(origin, home, tmp_path):
    """``get URL -o /abs -b``: the job's request fixed the current directory for its URLs even when
    ``-o`` said where the file goes, and refused ("the current directory was removed ... give
    absolute paths (-P DIR, -o FILE)", exit 5) to a user who had."""
    out = tmp_path / "data" / "d.bin"
    started = _in_removed_dir(tmp_path, [sys.executable, "-m", "prefetch", "get", origin.url_for("d.bin"),
                                         "-o", str(out), "-b"])
    assert started.returncode == 0, started.stderr
    waited = subprocess.run([sys.executable, "-m", "prefetch", "wait", "--timeout", "120"], capture_output=True,
                            text=True, timeout=180, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    assert out.read_bytes() == DATA


def test_a_background_get_into_the_removed_directory_is_still_refused(origin, home, tmp_path):
    started = _in_removed_dir(tmp_path, [sys.executable, "-m", "prefetch", "get", origin.url_for("d.bin"), "-b"])
    assert started.returncode == 5, started.stderr
    assert "current directory was removed" in started.stderr and "Traceback" not in started.stderr


@pytest.mark.parametrize("argv,env", [
    (["get", "URL", "-o", "rel/d.bin", "-b"], {}),
    (["get", "mnist", "-b"], {"KERAS_HOME": "relative-keras"}),
    (["get", "ms://acme/tiny", "--cache-dir", "relative-ms"], {}),
    (["get", "ms://acme/tiny", "--cache-dir", "relative-ms", "-b"], {}),
], ids=["o-relative-b", "keras-home-relative-b", "ms-cache-dir-relative", "ms-cache-dir-relative-b"])
def test_a_relative_path_from_a_removed_directory_is_one_line_not_an_internal_error(origin, home, tmp_path, argv,
                                                                                     env):
    """A relative -o, KERAS_HOME or --cache-dir made absolute from a removed directory was
    "internal error (a bug in prefetch): FileNotFoundError" and a crash report, exit 1."""
    argv = [origin.url_for("d.bin") if a == "URL" else a for a in argv]
    environ = dict(os.environ, **env, MODELSCOPE_ENDPOINT="http://127.0.0.1:9", PREFETCH_RETRIES="1")
    gone = tmp_path / "gone"
    gone.mkdir()
    got = subprocess.run([sys.executable, "-m", "prefetch", *argv], cwd=gone, env=environ,
                         preexec_fn=lambda: os.rmdir(gone), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert got.returncode == 5, (got.returncode, got.stderr)
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and "the current directory was removed" in lines[0], got.stderr
    assert not (home / ".prefetch" / "state" / "crashes").exists()
