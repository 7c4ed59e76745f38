"""Cache housekeeping through the real CLI: list sizes and partials, rm, clean.

Real background downloads hold real locks; the tests check that rm and clean never
touch them, never follow links, and that --dry-run changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests import datasets_synth
from tests.conftest import run_cli
from tests.test_jobs import job_id_from, poll, synthetic

SLOW = 3 * 1024 * 1024


def slow_registry(tmp_path: Path, origin, names: list[str]) -> tuple[Path, dict[str, bytes]]:
    """Synthetic cifar10/mnist/imdb plus ``slowset`` (one big file served slowly) in one registry."""
    files = datasets_synth.build_files()
    datasets_synth.serve_files(origin, files)
    text = datasets_synth.registry_text(origin.url, files, names=names)
    slow = synthetic(SLOW, seed=9)
    origin.put("slow.bin", slow)
    text += (f'\n[slowset]\ndescription = "a slow one"\n[[slowset.files]]\nurl = "{origin.url_for("slow.bin")}"\n'
             f'sha256 = "{hashlib.sha256(slow).hexdigest()}"\n')
    path = tmp_path / "registry.toml"
    path.write_text(text)
    return path, {"slow.bin": slow, **files}


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every path under ``roots`` with its type, size and mtime (links not followed)."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                out[p] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def start_slow_job(origin, registry: Path, rate: int = 256 * 1024) -> str:
    origin.rate = rate  # per connection: the job stays running for a while
    started = run_cli("get", "slowset", "--registry", str(registry), "-b", "--connections", "2")
    assert started.returncode == 0, started.stderr
    return job_id_from(started.stdout)


def test_rm_during_a_running_download_of_another_dataset(origin, home, tmp_path, keras_datasets):
    registry, files = slow_registry(tmp_path, origin, ["cifar10", "mnist"])
    got = run_cli("get", "cifar10", "mnist", "--registry", str(registry))
    assert got.returncode == 0, got.stderr
    assert (keras_datasets / "cifar-10-batches-py").is_dir() and (keras_datasets / "cifar-10-batches-py-target").is_dir()
    job = start_slow_job(origin, registry)
    part = keras_datasets / "slow.bin.part"
    poll(lambda: part.exists() and part.stat().st_size > 0, what="the slow download to start")

    removed = run_cli("rm", "cifar10", "--registry", str(registry))
    busy = run_cli("rm", "slowset", "--registry", str(registry))

    assert removed.returncode == 0, removed.stderr
    for name in ("cifar-10-batches-py.tar.gz", "cifar-10-batches-py-target_archive", "cifar-10-batches-py",
                 "cifar-10-batches-py-target"):
        assert not os.path.lexists(keras_datasets / name), name
    assert (keras_datasets / "mnist.npz").read_bytes() == files["mnist.npz"]  # other datasets untouched
    assert "removed" in removed.stdout and str(keras_datasets / "cifar-10-batches-py") in removed.stdout
    assert busy.returncode == 1 and "left alone" in busy.stdout, busy.stdout + busy.stderr
    assert part.exists()  # neither rm touched the running download
    origin.rate = None
    waited = run_cli("wait", job, "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (keras_datasets / "slow.bin").read_bytes() == files["slow.bin"]
    again = run_cli("get", "cifar10", "--registry", str(registry))  # removed means really gone: fetched again
    assert again.returncode == 0 and again.stdout.startswith("downloaded"), again.stdout


def test_list_shows_sizes_totals_and_partials_then_clean(origin, home, tmp_path, keras_datasets):
    registry, files = slow_registry(tmp_path, origin, ["mnist"])
    assert run_cli("get", "mnist", "--registry", str(registry)).returncode == 0
    job = start_slow_job(origin, registry, rate=128 * 1024)
    part = keras_datasets / "slow.bin.part"
    poll(lambda: part.exists() and part.stat().st_size > 0, what="the slow download to start")

    running = json.loads(run_cli("list", "--registry", str(registry), "--json").stdout)
    assert run_cli("cancel", job).returncode in (0, 7)
    listed = json.loads(run_cli("list", "--registry", str(registry), "--json").stdout)
    text = run_cli("list", "--registry", str(registry)).stdout

    rows = {d["name"]: d for d in listed["datasets"]}
    mnist = rows["mnist"]
    assert mnist["state"] == "complete"
    assert mnist["bytes"] >= len(files["mnist.npz"]) and mnist["partials"] == []
    slow = rows["slowset"]
    assert slow["state"] == "partial" and [Path(p["path"]).name for p in slow["partials"]] == ["slow.bin.part"]
    assert slow["partials"][0]["active"] is False and slow["partials"][0]["age"] >= 0
    assert {d["name"]: d for d in running["datasets"]}["slowset"]["partials"][0]["active"] is True
    assert listed["total_bytes"] == sum(d["bytes"] for d in listed["datasets"])
    assert rows["cifar10"]["bytes"] == 0
    lines = text.splitlines()
    assert lines[-1].startswith("total: ") and "2 dataset(s)" in lines[-1]
    slow_line = next(line for line in lines if line.startswith("slowset"))
    assert "partial" in slow_line and " old" in slow_line

    # Too fresh for the default 7 days: clean leaves the partial.
    fresh = run_cli("clean")
    assert fresh.returncode == 0 and "nothing to remove" in fresh.stdout and part.exists()
    week_ago = time.time() - 8 * 86400
    for p in (part, keras_datasets / "slow.bin.part.json"):
        os.utime(p, (week_ago, week_ago))
    before = snapshot(home)
    dry = run_cli("clean", "--dry-run", "--json")
    assert snapshot(home) == before  # a dry run changes nothing, not even prefetch's own state
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] and {Path(r["path"]).name for r in planned["removed"]} == {"slow.bin.part",
                                                                                      "slow.bin.part.json"}
    cleaned = run_cli("clean")
    assert cleaned.returncode == 0 and "removed 2 path(s)" in cleaned.stdout
    assert not part.exists() and (keras_datasets / "mnist.npz").exists()


def test_clean_removes_orphaned_temp_dirs_but_not_running_ones(home, tmp_path, keras_datasets):
    keras_datasets.mkdir(parents=True)
    orphan = keras_datasets / ".cifar-10-batches-py-target.extract-0badf00d"
    (orphan / "cifar-10-batches-py").mkdir(parents=True)
    (orphan / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"x" * 5000)
    beside = keras_datasets.parent / ".datasets.extract-12345678"  # extraction into datasets/ stages beside it
    beside.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_tmp = keras_datasets / f".mnist.npz.{dead.stdout.strip()}.tmp"
    dead_tmp.write_bytes(b"half")
    live_tmp = keras_datasets / f".imdb.npz.{os.getpid()}.tmp"
    live_tmp.write_bytes(b"being written")
    keep = keras_datasets / "mine.txt"
    keep.write_text("a user's file")

    before = snapshot(home)
    dry = run_cli("clean", "--dry-run")
    assert snapshot(home) == before
    assert "would remove" in dry.stdout and "(dry run: nothing changed)" in dry.stdout

    done = run_cli("clean", "--json")

    result = json.loads(done.stdout)
    assert {Path(r["path"]).name for r in result["removed"]} == {orphan.name, beside.name, dead_tmp.name}
    assert result["bytes"] >= 5000
    assert not orphan.exists() and not beside.exists() and not dead_tmp.exists()
    assert live_tmp.exists() and keep.exists()
    assert any(live_tmp.name in line for line in result["skipped"])


def test_rm_removes_links_and_never_follows_them(home, tmp_path, keras_datasets):
    keras_datasets.mkdir(parents=True)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep me")
    outside_file = tmp_path / "precious.npz"
    outside_file.write_bytes(b"keep me too")
    (keras_datasets / "mnist.npz").symlink_to(outside_file)
    (keras_datasets / "cifar-10-batches-py-target").symlink_to(outside, target_is_directory=True)

    proc = run_cli("rm", "mnist", "cifar10")

    assert proc.returncode == 0, proc.stderr
    assert not os.path.lexists(keras_datasets / "mnist.npz")
    assert not os.path.lexists(keras_datasets / "cifar-10-batches-py-target")
    assert outside_file.read_bytes() == b"keep me too" and (outside / "keep.txt").read_text() == "keep me"


def test_rm_unknown_name_removes_nothing(home, keras_datasets):
    keras_datasets.mkdir(parents=True)
    (keras_datasets / "mnist.npz").write_bytes(b"m")
    proc = run_cli("rm", "mnist", "no-such-set")
    assert proc.returncode == 2 and proc.stderr.startswith("prefetch: error: unknown dataset 'no-such-set'")
    assert (keras_datasets / "mnist.npz").exists()
    bad_age = run_cli("clean", "--older-than", "soon")
    assert bad_age.returncode == 2 and "--older-than" in bad_age.stderr


def test_python_api_for_housekeeping(home, keras_datasets):
    import prefetch

    keras_datasets.mkdir(parents=True)
    (keras_datasets / "mnist.npz").write_bytes(b"m" * 10000)
    stale = keras_datasets / "imdb.npz.part"
    stale.write_bytes(b"i" * 5000)
    os.utime(stale, (time.time() - 9 * 86400,) * 2)

    usage = {u.name: u for u in prefetch.cache_usage()}
    assert set(usage) == {"mnist", "imdb"} and usage["mnist"].bytes >= 10000
    assert [Path(p.path).name for p in usage["imdb"].partials] == ["imdb.npz.part"]
    dry = prefetch.clean(dry_run=True)
    assert dry.dry_run and [Path(r.path).name for r in dry.removed] == ["imdb.npz.part"] and stale.exists()
    assert prefetch.clean(older_than="10d").removed == [] and stale.exists()
    assert [Path(r.path).name for r in prefetch.clean().removed] == ["imdb.npz.part"] and not stale.exists()
    gone = prefetch.remove("mnist")
    assert [Path(r.path).name for r in gone.removed] == ["mnist.npz"] and gone.bytes >= 10000
    assert not (keras_datasets / "mnist.npz").exists()


def test_rm_also_forgets_prefetchs_records_of_the_dataset(origin, home, tmp_path, keras_datasets):
    registry, _ = slow_registry(tmp_path, origin, ["mnist"])
    assert run_cli("get", "mnist", "--registry", str(registry)).returncode == 0
    from prefetch.cache.placement import completion_path, read_completion

    placed, final = home / ".prefetch" / "state" / "placed", keras_datasets / "mnist.npz"
    assert read_completion(placed, final), "the flow recorded the placed file"
    # Its record is on the file where the filesystem takes extended attributes; a record
    # file in placed/ (there, or one an older prefetch wrote) is forgotten too.
    placed.mkdir(parents=True, exist_ok=True)
    if not completion_path(placed, final).exists():
        completion_path(placed, final).write_text("{}")

    proc = run_cli("rm", "mnist", "--registry", str(registry), "--json")

    removed = json.loads(proc.stdout)["removed"]
    assert {r["reason"] for r in removed} >= {"file", "marker"}
    assert sorted(p.name for p in placed.iterdir()) == []
    assert read_completion(placed, final) is None
