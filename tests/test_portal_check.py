"""The portal check without false alarms (issue 21, item 3).

Only a text body (HTML, XML, JSON, plain text) standing where the name promises binary
data is a web page. A binary body whose magic bytes differ from the name (a ``.tar`` that
is gzip-compressed, a shard of raw bytes) is the server's data: kept, with one warning
line. Real nginx (``application/x-tar`` for ``.tar``, as a stock nginx sends it) and the
local origin, through the real CLI.
"""

from __future__ import annotations

import gzip
import io
import random
import tarfile

import pytest

from tests.conftest import run_cli
from tests.origin import WebPage
from tests.test_faults import fault_env

SHARD = "imagenette-320px-train-shard-00001-of-00004.tar"


def warnings_in(stderr: str, needle: str) -> list[str]:
    return [line for line in stderr.splitlines() if needle in line]


def test_a_tar_shard_of_raw_bytes_from_nginx_is_kept_with_one_warning(home, nginx_origin, tmp_path):
    raw = random.Random(3).randbytes(2 << 20)  # not a tar: no header, no checksum
    (nginx_origin.root / SHARD).write_bytes(raw)
    gz_tar = io.BytesIO()
    with tarfile.open(fileobj=gz_tar, mode="w:gz") as tar:
        data = random.Random(4).randbytes(300_000)
        info = tarfile.TarInfo("x.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (nginx_origin.root / "labels.tar").write_bytes(gz_tar.getvalue())  # a .tar that is gzip-compressed

    proc = run_cli("get", nginx_origin.url_for(SHARD), nginx_origin.url_for("labels.tar"), "-P", str(tmp_path))

    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / SHARD).read_bytes() == raw
    assert (tmp_path / "labels.tar").read_bytes() == gz_tar.getvalue()
    assert "captive portal" not in proc.stderr
    assert len(warnings_in(proc.stderr, f"{SHARD} from 127.0.0.1")) == 1, proc.stderr
    assert "not a tar file" in warnings_in(proc.stderr, f"{SHARD} from")[0]
    assert len(warnings_in(proc.stderr, "labels.tar from 127.0.0.1")) == 1, proc.stderr


def test_binary_bytes_labelled_text_html_are_the_file(home, origin, tmp_path):
    """A server that labels everything text/html: judged by the bytes, not the label."""
    data = random.Random(5).randbytes(400_000)
    origin.put("model.bin", data)
    for _ in range(40):
        origin.add_fault(WebPage(body=data, content_type="text/html; charset=utf-8", path="model.bin"))

    proc = run_cli("get", origin.url_for("model.bin"), "-P", str(tmp_path))

    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "model.bin").read_bytes() == data


@pytest.mark.parametrize("name,body,content_type", [
    ("train.tar.gz", b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code></Error>',
     "application/xml"),
    ("weights.npz", b'{"error": "quota exceeded", "code": 403}', "application/json"),
    ("shard.npy", b"Please log in to the campus network to continue.\n" * 5, "text/plain"),
    (SHARD, b"<html><body>blocked</body></html>", "application/x-tar"),
    ("shard.bin", b'{"error": "login required", "portal": "http://10.0.0.1/"}', "text/plain"),
], ids=["xml-error", "json-error", "plain-text", "html-as-tar", "json-as-bin"])
def test_a_text_body_where_binary_is_promised_is_a_web_page(home, origin, tmp_path, name, body, content_type):
    origin.put(name, random.Random(6).randbytes(100_000))
    for _ in range(40):
        origin.add_fault(WebPage(body=body, content_type=content_type, path=name))

    proc = run_cli("get", origin.url_for(name), "-P", str(tmp_path), env=fault_env(PREFETCH_RETRIES="2"))

    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1 and "web page instead of the file" in errors[0], proc.stderr
    assert not (tmp_path / name).exists()


def test_a_gzip_body_for_a_json_name_is_kept_and_a_page_for_it_is_not(home, origin, tmp_path):
    """A text name is judged the other way round: only HTML is a page; other bytes are kept."""
    packed = gzip.compress(b'{"a": 1}' * 1000)
    origin.put("index.json", packed)
    proc = run_cli("get", origin.url_for("index.json"), "-P", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "index.json").read_bytes() == packed
    assert len(warnings_in(proc.stderr, "not a JSON file")) == 1, proc.stderr
