"""prefetch.get_file against real Keras's keras.utils.get_file, and prefetch.fetch.

Both run in one fresh Python process (``KERAS_BACKEND=numpy``, as in test_keras.py) on
the same inputs from a loopback origin, each into its own temporary cache dir; the
test compares what they return and every file they leave on disk.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pytest

import prefetch
from prefetch.errors import HashMismatchError, IntegrityError

RUNNER = textwrap.dedent(
    """
    import hashlib, json, os, sys, tempfile, warnings
    import keras
    import prefetch

    cases = json.loads(open(sys.argv[1]).read())
    out = []

    def tree(root):
        found = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for d in dirnames:
                found[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
            for f in filenames:
                p = os.path.join(dirpath, f)
                found[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
        return found

    def run(fn, kwargs, cache, shown):
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                path = fn(cache_dir=cache, **kwargs)
            return {"return": shown(path), "warned": [str(w.message) for w in caught
                    if "extract" in str(w.message)]}
        except Exception as exc:
            return {"raised": type(exc).__name__, "value_error": isinstance(exc, ValueError),
                    "message": str(exc)}

    for case in cases:
        row = {}
        for label, fn in (("keras", keras.utils.get_file), ("prefetch", prefetch.get_file)):
            call = dict(case)
            cache = tempfile.mkdtemp(prefix=label + "-")
            # "_plant": files already in the cache before the call ({relative path: text}).
            for rel, text in call.pop("_plant", {}).items():
                os.makedirs(os.path.dirname(os.path.join(cache, rel)), exist_ok=True)
                open(os.path.join(cache, rel), "w").write(text)
            # "ABS:name" as cache_subdir: an absolute folder of this side's own, shown as "ABS/...".
            elsewhere = None
            if str(call.get("cache_subdir", "")).startswith("ABS:"):
                elsewhere = tempfile.mkdtemp(prefix=label + "-abs-")
                call["cache_subdir"] = os.path.join(elsewhere, call["cache_subdir"][4:])
            def shown(path, cache=cache, elsewhere=elsewhere):
                if elsewhere and path.startswith(elsewhere):
                    return "ABS/" + os.path.relpath(path, elsewhere)
                return os.path.relpath(path, cache)
            for _ in range(call.pop("_calls", 1)):
                row[label] = run(fn, call, cache, shown)
            row[label]["tree"] = tree(cache)
            if elsewhere:
                row[label]["tree"].update({"ABS/" + k: v for k, v in tree(elsewhere).items()})
        out.append(row)
    open(sys.argv[2], "w").write(json.dumps(out))
    """
)


def tar_bytes(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_both(cases: list[dict], tmp_path) -> list[dict]:
    cases_file, out_file = tmp_path / "cases.json", tmp_path / "out.json"
    cases_file.write_text(json.dumps(cases))
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    env = dict(os.environ, KERAS_BACKEND="numpy")
    proc = subprocess.run([sys.executable, str(script), str(cases_file), str(out_file)], capture_output=True,
                          text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out_file.read_text())


def test_get_file_matches_keras_get_file(origin, home, tmp_path):
    plain = os.urandom(300_000)
    tgz = tar_bytes({"pack/a.txt": b"alpha", "pack/deep/b.txt": b"beta", "top.txt": b"top"})
    plain_tar = tar_bytes({"legacy/x.txt": b"x" * 1000}, mode="w")
    zipped = zip_bytes({"z/one.txt": b"one", "two.txt": b"two"})
    for name, data in (("plain.bin", plain), ("pack.tar.gz", tgz), ("legacy.tar", plain_tar), ("data.zip", zipped)):
        origin.put(name, data)
    url = origin.url_for
    cases = [
        {"fname": "plain.bin", "origin": url("plain.bin"), "file_hash": sha(plain)},
        {"origin": url("plain.bin"), "md5_hash": hashlib.md5(plain).hexdigest(), "cache_subdir": "models"},
        {"origin": url("pack.tar.gz"), "extract": True, "file_hash": sha(tgz)},
        {"fname": "pack.tar.gz", "origin": url("pack.tar.gz"), "extract": True},
        {"fname": "mydata", "origin": url("pack.tar.gz"), "extract": True, "archive_format": "tar"},
        {"fname": "legacy", "origin": url("legacy.tar"), "untar": True},
        {"fname": "zipped", "origin": url("data.zip"), "extract": True},
        {"fname": "notarchive", "origin": url("plain.bin"), "extract": True},  # both warn, nothing extracted
        {"fname": "bad.bin", "origin": url("plain.bin"), "file_hash": "0" * 64},  # mismatch: both raise
    ]

    rows = run_both(cases, tmp_path)

    for case, row in zip(cases, rows):
        keras_side, ours = row["keras"], row["prefetch"]
        if "raised" in keras_side:
            assert ours.get("raised") and ours["value_error"] and keras_side["value_error"], (case, row)
            # Keras leaves the bad file at its final path; prefetch leaves nothing there (nor a .part).
            assert "datasets/bad.bin" in keras_side["tree"], row
            assert ours["tree"] == {"datasets": "dir"}, (case, ours["tree"])
            continue
        assert ours["return"] == keras_side["return"], (case, row)
        assert ours["tree"] == keras_side["tree"], (case, row)
        assert bool(ours["warned"]) == bool(keras_side["warned"]), (case, row)
    assert rows[2]["prefetch"]["return"] == "datasets/pack.tar.gz"  # Keras >= 3.6 naming
    assert rows[3]["prefetch"]["return"] == "datasets/pack_extracted"
    assert rows[5]["prefetch"]["tree"]["datasets/legacy/legacy/x.txt"] == sha(b"x" * 1000)


def test_get_file_uses_the_cache_and_force_download(origin, home, tmp_path):
    data = os.urandom(50_000)
    origin.put("c.bin", data)
    cache = tmp_path / "cache"
    cache.mkdir()

    first = prefetch.get_file("c.bin", origin.url_for("c.bin"), file_hash=sha(data), cache_dir=str(cache),
                              progress=False)
    second = prefetch.get_file("c.bin", origin.url_for("c.bin"), file_hash=sha(data), cache_dir=str(cache),
                               progress=False)
    assert first == second == os.path.join(str(cache), "datasets", "c.bin")
    assert len(origin.data_requests("c.bin")) == 1
    prefetch.get_file("c.bin", origin.url_for("c.bin"), cache_dir=str(cache), force_download=True, progress=False)
    assert len(origin.data_requests("c.bin")) == 2
    with pytest.raises(ValueError, match="origin"):
        prefetch.get_file("x.bin", None)
    with pytest.raises(ValueError, match="Paths are no longer accepted"):
        prefetch.get_file("a/b.bin", origin.url_for("c.bin"), cache_dir=str(cache))


def test_fetch_returns_the_path_and_extracts(origin, home, tmp_path):
    data = os.urandom(40_000)
    archive = tar_bytes({"inner/file.txt": b"content"}, mode="w:xz")
    origin.put("f.bin", data)
    origin.put("bundle.tar.xz", archive)

    path = prefetch.fetch(origin.url_for("f.bin"), sha256=sha(data))
    assert path == home / ".keras" / "datasets" / "f.bin" and path.read_bytes() == data
    other = prefetch.fetch(origin.url_for("f.bin"), known_hash=f"md5:{hashlib.md5(data).hexdigest()}",
                           path=tmp_path / "p", fname="g.bin")
    assert other == tmp_path / "p" / "g.bin" and other.read_bytes() == data
    folder = prefetch.fetch(origin.url_for("bundle.tar.xz") + f"#sha256={sha(archive)}", extract=True,
                            path=tmp_path / "q")
    assert folder == tmp_path / "q" / "bundle"
    assert (folder / "inner" / "file.txt").read_bytes() == b"content"

    with pytest.raises(HashMismatchError) as info:
        prefetch.fetch(origin.url_for("f.bin"), sha256="1" * 64, path=tmp_path / "r")
    assert isinstance(info.value, IntegrityError) and isinstance(info.value, ValueError)
    assert not (tmp_path / "r" / "f.bin").exists()
    with pytest.raises(ValueError):
        prefetch.fetch(origin.url_for("f.bin"), sha256="xyz", path=tmp_path / "s")


def test_import_prefetch_stays_light():
    code = "import sys, prefetch; print(sorted(m for m in ('http.client', 'requests', 'rich', 'tqdm', 'tarfile', " \
           "'prefetch.engine.transfer', 'prefetch.flow.request') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def keras_cases(url, data: bytes, tgz: bytes) -> list[dict]:
    """The same calls for an http:// and a file:// origin: every argument, cache hits and misses."""
    md5 = hashlib.md5(data).hexdigest()
    return [
        {"origin": url("plain.bin")},
        {"fname": "p.bin", "origin": url("plain.bin"), "file_hash": sha(data), "hash_algorithm": "sha256"},
        {"fname": "p.bin", "origin": url("plain.bin"), "md5_hash": md5},
        {"fname": "p.bin", "origin": url("plain.bin"), "file_hash": md5, "hash_algorithm": "md5",
         "cache_subdir": "models/deep"},
        {"fname": "p.bin", "origin": url("plain.bin"), "cache_subdir": "ABS:elsewhere"},
        {"fname": "pack", "origin": url("pack.tar.gz"), "untar": True, "file_hash": sha(tgz)},
        {"fname": "pack.tar.gz", "origin": url("pack.tar.gz"), "extract": True},
        {"origin": url("pack.tar.gz"), "extract": True, "archive_format": "tar"},
        # A cached file without a hash is reused as it is, even a stale one (Keras checks nothing).
        {"fname": "p.bin", "origin": url("plain.bin"), "_plant": {"datasets/p.bin": "stale"}},
        # ... with a hash that it does not match, it is downloaded again; with force_download, always.
        {"fname": "p.bin", "origin": url("plain.bin"), "file_hash": sha(data), "_plant": {"datasets/p.bin": "stale"}},
        {"fname": "p.bin", "origin": url("plain.bin"), "force_download": True, "_plant": {"datasets/p.bin": "old"}},
        # A second call is a cache hit (same return, same tree).
        {"fname": "p.bin", "origin": url("plain.bin"), "file_hash": sha(data), "_calls": 2},
        # Errors: a bad hash, an fname with path segments.
        {"fname": "bad.bin", "origin": url("plain.bin"), "file_hash": "0" * 64},
        {"fname": "sub/p.bin", "origin": url("plain.bin")},
    ]


def test_get_file_is_a_drop_in_for_http_and_file_origins(origin, home, tmp_path):
    data = os.urandom(200_000)
    tgz = tar_bytes({"pack/a.txt": b"alpha", "top.txt": b"top"})
    mount = tmp_path / "mount"
    mount.mkdir()
    for name, body in (("plain.bin", data), ("pack.tar.gz", tgz)):
        origin.put(name, body)
        (mount / name).write_bytes(body)
    cases = keras_cases(origin.url_for, data, tgz) + keras_cases(lambda n: (mount / n).as_uri(), data, tgz)

    rows = run_both(cases, tmp_path)

    for case, row in zip(cases, rows):
        keras_side, ours = row["keras"], row["prefetch"]
        if "raised" in keras_side:
            assert ours.get("raised") and ours["value_error"] and keras_side["value_error"], (case, row)
            start = keras_side["message"].split(". ")[0]
            assert ours["message"].startswith(start), (case, row)
            assert not any(k.endswith("bad.bin") for k in ours["tree"]), ours["tree"]  # nothing left, no .part
            continue
        assert ours.get("return") == keras_side["return"], (case, row)
        assert ours["tree"] == keras_side["tree"], (case, row)
    stale = [r for c, r in zip(cases, rows) if c.get("_plant") == {"datasets/p.bin": "stale"} and "file_hash" not in c]
    assert len(stale) == 2 and all(r["prefetch"]["tree"]["datasets/p.bin"] == sha(b"stale") for r in stale)


def test_get_file_keeps_a_relative_cache_subdir_inside_cache_dir(origin, home, tmp_path):
    """Keras 3.15 writes wherever ``cache_dir/../x`` leads; prefetch refuses with a ValueError (and writes nothing)."""
    origin.put("p.bin", bytes(range(256)))
    cache = tmp_path / "cache"
    cache.mkdir()  # (an unwritable or missing cache_dir falls back to /tmp/.keras, as in Keras)
    for subdir in ("../outside", "a/../../outside", "b/../../x"):
        with pytest.raises(ValueError, match="leads out of cache_dir"):
            prefetch.get_file("p.bin", origin.url_for("p.bin"), cache_dir=str(cache), cache_subdir=subdir,
                              progress=False)
    assert not (tmp_path / "outside").exists() and not (tmp_path / "x").exists()
    assert origin.data_requests("p.bin") == []
    inside = prefetch.get_file("p.bin", origin.url_for("p.bin"), cache_dir=str(cache), cache_subdir="a/../b",
                               progress=False)
    assert inside == os.path.join(str(cache), "a/../b", "p.bin") and open(inside, "rb").read() == bytes(range(256))
