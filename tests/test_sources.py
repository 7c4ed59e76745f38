"""Several URLs per registry file (``urls = [...]``): every copy reaches the engine as a
source, and a wrong copy costs a failed verification, never a wrong file."""

from __future__ import annotations

import hashlib
import socket

from prefetch.errors import ExitCode
from tests.origin import OriginServer

NAME = "data.bin"


def payload(size: int, seed: int) -> bytes:
    import random

    return random.Random(seed).randbytes(size)


def refused_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/{NAME}"


def write_registry(path, *, url: str, urls: list[str], data: bytes | None = None, size: int | None = None) -> str:
    lines = ["[toy]", "[[toy.files]]", f'name = "{NAME}"', f'url = "{url}"',
             "urls = [" + ", ".join(f'"{u}"' for u in urls) + "]"]
    if data is not None:
        lines.append(f'sha256 = "{hashlib.sha256(data).hexdigest()}"')
    if size is not None:
        lines.append(f"size = {size}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_every_copy_is_a_source(home, tmp_path, cli, keras_datasets):
    data = payload(3 << 20, 1)
    with OriginServer() as one, OriginServer() as two:
        one.put(NAME, data)
        two.put(NAME, data)
        one.rate = two.rate = 1 << 20  # slow enough that both get asked for bytes
        registry = write_registry(tmp_path / "r.toml", url=one.url_for(NAME), urls=[two.url_for(NAME)], data=data)

        proc = cli("get", "toy", "--registry", registry, "--connections", "4")

        assert proc.returncode == 0, proc.stderr
        assert (keras_datasets / NAME).read_bytes() == data
        assert one.data_requests(NAME) and two.data_requests(NAME)


def test_wrong_copy_costs_a_verification_never_a_wrong_file(home, tmp_path, cli, keras_datasets):
    """The origin refuses connections; one copy has the same size but other bytes; one is right."""
    data = payload(2 << 20, 2)
    with OriginServer() as wrong, OriginServer() as right:
        wrong.put(NAME, payload(2 << 20, 3))
        right.put(NAME, data)
        wrong.rate = right.rate = 1 << 20
        registry = write_registry(tmp_path / "r.toml", url=refused_url(),
                                  urls=[wrong.url_for(NAME), right.url_for(NAME)], data=data)

        proc = cli("get", "toy", "--registry", registry, "--connections", "4")

        assert proc.returncode == 0, proc.stderr
        assert (keras_datasets / NAME).read_bytes() == data
        assert wrong.data_requests(NAME), "the wrong copy was never tried"
        assert "mismatch" in proc.stderr


def test_registry_size_rejects_a_copy_of_another_size(home, tmp_path, cli, keras_datasets):
    """Without a hash, the registry's size alone refuses a file of another length (exit 4)."""
    with OriginServer() as server:
        server.put(NAME, bytes(range(256)) * 4)  # binary (text where a .bin is promised is a web page)
        registry = write_registry(tmp_path / "r.toml", url=server.url_for(NAME), urls=[], size=999)

        proc = cli("get", "toy", "--registry", registry)

        assert proc.returncode == ExitCode.INTEGRITY, proc.stderr
        assert "expected 999" in proc.stderr
        assert not (keras_datasets / NAME).exists()
