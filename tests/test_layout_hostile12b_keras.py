"""Keras 3's get_file attacked with the real Keras (KERAS_BACKEND=numpy): for each call, the
real ``keras.utils.get_file`` downloads from an nginx on 127.0.0.1 into one KERAS_HOME and
``prefetch.get_file`` fetches the same into another; the two trees must be the same (names,
bytes), the returned paths the same relative to their homes, and the real Keras then reads
prefetch's tree offline (the origin's port closed, urlretrieve raising): extract=True's
``<name>_extracted`` / ``<name>_archive`` rule (several dots, no dot, no fname), cache_subdir
(nested, absolute), file_hash md5/sha256 (auto and named), a wrong hash refused by both,
KERAS_HOME (relative too) and ~/.keras without it."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

from tests.conftest import run_cli  # noqa: F401 - (the home fixture's module)

CLOSED = "http://127.0.0.1:9/"

JUDGE = r"""
import json, os, sys
import keras.src.utils.file_utils as file_utils
which, calls = sys.argv[1], json.loads(sys.argv[2])
if which == "offline":
    def no_download(url, *args, **kwargs):
        raise AssertionError(f"Keras tried to download {url}")
    file_utils.urlretrieve = no_download
if which == "prefetch":
    import prefetch
    get_file = lambda **kw: prefetch.get_file(progress=False, **kw)
else:
    import keras
    get_file = keras.utils.get_file
out = []
for kw in calls:
    try:
        out.append("ok:" + os.path.abspath(get_file(**kw)))
    except ValueError as exc:
        out.append("ValueError")
print(json.dumps(out))
"""


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _run(which: str, calls: list[dict], env: dict, cwd) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", JUDGE, which, json.dumps(calls)], capture_output=True, text=True,
                          timeout=280, env=dict(env, KERAS_BACKEND="numpy"), cwd=cwd, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (which, proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tree(root) -> dict[str, str]:
    found = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                found[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()[:12]
    return found


def _calls(url: str, archive: bytes, plain: bytes, absolute: str) -> list[dict]:
    md5, sha = hashlib.md5(plain).hexdigest(), hashlib.sha256(plain).hexdigest()
    return [
        dict(origin=url + "flowers.tar.gz", extract=True),  # no fname: flowers.tar.gz/ + _archive
        dict(fname="flower.photos.v2.tgz", origin=url + "flowers.tar.gz", extract=True),  # first dot: _extracted
        dict(fname="petals", origin=url + "flowers.tar.gz", extract=True, file_hash=hashlib.sha256(archive).hexdigest()),
        dict(fname="old.tgz", origin=url + "flowers.tar.gz", untar=True, cache_subdir="a/b"),
        dict(origin=url + "w.v1.bin", file_hash=md5, cache_subdir="models"),  # auto, 32 chars: md5
        dict(fname="w2.bin", origin=url + "w.v1.bin", file_hash=sha),  # auto, 64 chars: sha256
        dict(fname="w3.bin", origin=url + "w.v1.bin", md5_hash=md5),
        dict(fname="w4.bin", origin=url + "w.v1.bin", file_hash=sha, hash_algorithm="sha256", cache_subdir=absolute),
        dict(fname="w5.bin", origin=url + "w.v1.bin", file_hash="0" * 64),  # wrong: both refuse
    ]


def _compare(nginx_origin, tmp_path, env_for, label: str) -> None:
    archive = _tar({"flowers/rose.txt": b"rose\n", "flowers/sub/tulip.txt": b"tulip" * 100, "top.txt": b"t"})
    plain = os.urandom(50_000)
    (nginx_origin.root / "flowers.tar.gz").write_bytes(archive)
    (nginx_origin.root / "w.v1.bin").write_bytes(plain)
    cwd = tmp_path / f"nb-{label}"
    cwd.mkdir()
    results, homes = {}, {}
    for which in ("keras", "prefetch"):
        env, home = env_for(tmp_path / f"{label}-{which}", cwd)
        absolute = str(tmp_path / f"{label}-{which}-abs")
        results[which] = _run(which, _calls(nginx_origin.url, archive, plain, absolute), env, cwd)
        homes[which] = (home, absolute, env)
    k_home, k_abs, _ = homes["keras"]
    p_home, p_abs, p_env = homes["prefetch"]
    rel = [r.replace(k_home, "HOME").replace(k_abs, "ABS") for r in results["keras"]]
    assert [r.replace(p_home, "HOME").replace(p_abs, "ABS") for r in results["prefetch"]] == rel, (label, results)
    assert rel[-1] == "ValueError" and all(r.startswith("ok:") for r in rel[:-1]), rel
    kt, pt = _tree(k_home), _tree(p_home)
    kt.pop(os.path.join("datasets", "w5.bin"), None)  # Keras leaves the bad file; prefetch places nothing
    assert pt == kt, (label, sorted(set(pt) ^ set(kt)))
    assert _tree(p_abs) == _tree(k_abs)
    offline = _run("offline", _calls(CLOSED, archive, plain, p_abs)[:-1], p_env, cwd)
    assert offline == results["prefetch"][:-1], (label, offline)


def test_keras_get_file_layouts_under_keras_home(nginx_origin, home, tmp_path):
    def env_for(base, cwd):
        return dict(os.environ, KERAS_HOME=str(base)), str(base)
    _compare(nginx_origin, tmp_path, env_for, "abs")


def test_keras_get_file_layouts_under_a_relative_keras_home(nginx_origin, home, tmp_path):
    def env_for(base, cwd):
        name = base.name
        return dict(os.environ, KERAS_HOME=name), str(cwd / name)
    _compare(nginx_origin, tmp_path, env_for, "rel")


def test_keras_get_file_layouts_under_home_dot_keras(nginx_origin, home, tmp_path):
    def env_for(base, cwd):
        env = {k: v for k, v in os.environ.items() if k != "KERAS_HOME"}
        base.mkdir()
        env["HOME"] = str(base)
        return env, str(base / ".keras")
    _compare(nginx_origin, tmp_path, env_for, "home")
