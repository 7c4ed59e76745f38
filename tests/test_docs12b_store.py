"""docs/commands/store.md runs as typed: push, export and the reads of a flat mirror and a team store.

The page runs as two notebooks (tests/docs_pages.py), each ``!prefetch`` line in page order
through a ``prefetch`` on PATH: the lines that publish (``push``, ``export``) on a machine
that has the datasets cached, the lines that read (``get --mirror``, ``get --seed``: "the rest
read") on a second machine with an empty cache, so that they read from what the first
published. What the page leaves to the reader is filled in, and only that:

* the datasets are synthetic Keras files under the built-in names (tests/datasets_synth.py),
  served by a local origin through each config dir's ``registry.toml``; the first machine got
  ``cifar10`` and ``mnist`` before the page starts (``push`` reads "verified cached files");
* ``./my-data.tar.gz`` is a file of the reader's; ``s3://team-bucket/keras-datasets`` is a
  prefix of the SeaweedFS store, ``/srv/keras-datasets`` a folder, and
  ``http://10.0.0.5/keras-datasets/`` a local nginx serving that folder.

Not run: ``pip install 'prefetch-datasets[s3]'`` (boto3 is installed).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests import datasets_synth
from tests.docs_pages import ROOT, Notebook, isolated_env, localize, page_cells, prefetch_on_path
from tests.nginx import NginxServer, nginx_binary
from tests.origin import OriginServer
from tests.s3server import weed_binary

PAGE = ROOT / "docs" / "commands" / "store.md"
READS = ("--mirror", "--seed")


def machine(tmp_path: Path, name: str, s3_server, origin: OriginServer, files: dict[str, bytes]) -> Notebook:
    home = tmp_path / name
    home.mkdir()
    env = isolated_env(home, prefetch_on_path(tmp_path / "bin"))
    env.update(s3_server.env())
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(home / "no-aws-config")
    datasets_synth.write_registry(Path(env["PREFETCH_HOME"]) / "config" / "registry.toml", origin.url, files)
    work = tmp_path / f"{name}-cwd"
    work.mkdir()
    return Notebook(work, env)


def test_store_page_runs_as_typed(s3_server, tmp_path):
    if nginx_binary() is None or weed_binary() is None:
        raise RuntimeError("nginx and seaweedfs are needed: bash tests/run.sh installs them")
    files = datasets_synth.build_files()
    store = f"s3://team/docs12b-{hashlib.sha1(str(tmp_path).encode()).hexdigest()[:8]}/keras-datasets"
    srv = tmp_path / "srv"
    srv.mkdir()
    with OriginServer() as origin, NginxServer(srv) as nginx:
        datasets_synth.serve_files(origin, files)
        first = machine(tmp_path, "first", s3_server, origin, files)
        second = machine(tmp_path, "second", s3_server, origin, files)
        assert first.shell("prefetch get cifar10 mnist").returncode == 0  # (what the first machine has)
        (first.cwd / "my-data.tar.gz").write_bytes(os.urandom(4096))
        hosts = {"s3://team-bucket/keras-datasets": store, "/srv/keras-datasets": str(srv / "keras-datasets"),
                 "http://10.0.0.5/": nginx.url_for("")}
        served_before = {}
        failed = []
        for kind, code in page_cells(PAGE):
            if kind != "shell" or code.startswith("pip "):
                continue
            nb = second if any(flag in code for flag in READS) else first
            if nb is second and not served_before:
                served_before = {n: sum(1 for r in origin.requests if r.name == n) for n in files}
            ran = nb.shell(localize(code, hosts))
            if ran.returncode != 0:
                failed.append(str(ran))
        served = {n: sum(1 for r in origin.requests if r.name == n) - served_before.get(n, 0) for n in files}
        log = nginx.access_log.read_text()
    assert not failed, "store.md lines that fail as typed:\n" + "\n".join(failed)

    exported = srv / "keras-datasets"
    assert (exported / "mnist.npz").read_bytes() == files["mnist.npz"]
    sums = (exported / "SHA256SUMS").read_text()
    assert f"{hashlib.sha256(files['cifar-10-python.tar.gz']).hexdigest()}  cifar-10-python.tar.gz" in sums
    assert "/keras-datasets/cifar-10-python.tar.gz" in log  # the second machine read the flat mirror
    keras = Path(second.env["KERAS_HOME"]) / "datasets"
    assert (keras / "cifar-10-batches-py.tar.gz").read_bytes() == files["cifar-10-python.tar.gz"]  # (as Keras names it)
    assert (keras / "imdb.npz").read_bytes() == files["imdb.npz"]
    assert served["cifar-10-python.tar.gz"] == 0  # from the mirrors, never the origin
    assert served["imdb.npz"] >= 1  # the store lacked it: the seeder fetched it ...
    bucket, _, prefix = store[len("s3://"):].partition("/")
    keys = {o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    for name in ("cifar-10-python.tar.gz", "mnist.npz", "my-data.tar.gz", "imdb.npz"):  # ... and uploaded it
        assert f"{prefix}/{name}" in keys, sorted(keys)
