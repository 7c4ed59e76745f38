"""A stop reaches a single .gz's decompression and the Keras drop-in's extraction, as it reaches
a tar/zip extraction: it ends within a MiB or a member, nothing of it is placed, no temp stays,
exit 7 (InterruptedTransferError), and the next run finishes without fetching again."""

from __future__ import annotations

import gzip
import io
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import threading
from pathlib import Path

import pytest

from prefetch.archive.gunzip import decompress_gzip
from prefetch.errors import InterruptedTransferError
from tests import torchvision_synth as synth
from tests.test_jobs import job_id_from, poll, record, status_json
from tests.test_jobs import stop_leftover_workers  # noqa: F401 - autouse fixture
from tests.test_jobs_kill import no_hook_env


def test_a_set_stop_ends_the_decompression_with_nothing_placed(tmp_path):
    tmp_path = tmp_path / "gz"
    tmp_path.mkdir()
    source = tmp_path / "x.gz"
    source.write_bytes(gzip.compress(os.urandom(3 << 20)))
    stop = threading.Event()
    stop.set()
    with pytest.raises(InterruptedTransferError, match="nothing of it was placed"):
        decompress_gzip(source, tmp_path / "x", stop=stop)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.gz"]  # no target, no temp
    assert decompress_gzip(source, tmp_path / "x", stop=threading.Event()) == 3 << 20


def test_cancel_at_a_gz_decompression_places_nothing_and_resume_finishes_without_fetching(
        nginx_origin, home, tmp_path, cli, monkeypatch):
    registry = tmp_path / "mnist.toml"
    files = synth.served_mnist(nginx_origin.root, registry, 2)
    root = tmp_path / "data"
    monkeypatch.setenv("PREFETCH_TEST_PAUSE_AT", "extract")  # the worker pauses at its first decompression
    started = cli("get", "torchvision:MNIST", "--root", str(root), "--registry", str(registry),
                  "--mirror", nginx_origin.url, "-b")
    assert started.returncode == 0, started.stderr
    job_id = job_id_from(started.stdout)
    log = Path(record(job_id).log)
    paused = poll(lambda: [x for x in log.read_text().splitlines() if "test hook: pausing at extract" in x],
                  what="the pause before the decompression")
    name = next(n for n in files if paused[0].split()[1].endswith(n))  # the .gz the worker paused at

    cancelled = cli("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    poll(lambda: not record(job_id).active, what="the worker to end")
    (job,) = status_json(cli, job_id)["jobs"]
    assert job["state"] == "cancelled" and job["exit_code"] == 7, job
    raw = root / "MNIST" / "raw"
    assert not (raw / name).exists() and not (raw / name[:-3]).exists()  # neither placed
    assert (raw / f"{name}.part").read_bytes() == files[name]  # the verified .gz kept, complete
    assert not [p for p in raw.iterdir() if p.name.endswith(".tmp")]

    (nginx_origin.root / name).unlink()  # the rerun must not need it again
    resumed = cli("resume", job_id, env=no_hook_env())
    assert resumed.returncode == 0, resumed.stderr
    done = cli("wait", job_id, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (raw / name).read_bytes() == files[name]
    assert (raw / name[:-3]).read_bytes() == gzip.decompress(files[name])


DROPIN = textwrap.dedent("""
    import sys
    from prefetch.dropins import get_file
    from prefetch.errors import InterruptedTransferError
    try:
        path = get_file("many.tar", sys.argv[1], cache_dir=sys.argv[2], extract=True, progress=False)
    except InterruptedTransferError as exc:
        print("STOPPED", exc)
        sys.exit(7)
    print("PLACED", path)
""")


def test_ctrl_c_in_the_keras_dropins_extraction_ends_it_with_nothing_placed(origin, home, tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:  # ~20000 members: seconds to extract
        for i in range(20_000):
            data = b"member %d" % i
            info = tarfile.TarInfo(f"many/f{i:05d}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    origin.put("many.tar", buf.getvalue())
    cache = tmp_path / "keras"
    datadir = cache / "datasets"
    cache.mkdir()
    args = [sys.executable, "-c", DROPIN, origin.url_for("many.tar"), str(cache)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        poll(lambda: proc.poll() is not None or (datadir.is_dir() and any(
            ".extract-" in p.name for p in datadir.iterdir())), timeout=60, what="the extraction to start")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 7, (proc.returncode, out, err)
    assert "STOPPED" in out and "nothing of it was placed" in out, out
    assert sorted(p.name for p in datadir.iterdir()) == ["many.tar"]  # no folder, no temp dir
    fetched = len(origin.data_requests("many.tar"))

    again = subprocess.run(args, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(list((datadir / "many_extracted" / "many").iterdir())) == 20_000
    assert len(origin.data_requests("many.tar")) == fetched  # extracted from the file kept, not fetched
