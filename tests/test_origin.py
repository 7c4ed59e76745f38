"""The test origin servers themselves: Range semantics, faults, switches, TLS, nginx."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import socket
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
import requests

from tests.nginx import NginxServer, nginx_binary
from tests.origin import (
    ChangeContent,
    CloseAfter,
    Delay,
    Gzip,
    IgnoreRange,
    LongContentLength,
    OriginServer,
    Redirect,
    SilentServer,
    StallAfter,
    Status,
    WrongBytes,
    WrongContentRange,
    http_date,
)

DATA = bytes(range(256)) * 4  # 1024 bytes, every offset distinguishable by position
SIZE = len(DATA)


@pytest.fixture
def server():
    with OriginServer() as srv:
        srv.put("f.bin", DATA)
        yield srv


@pytest.fixture
def session():
    s = requests.Session()
    s.trust_env = False  # no proxies, no REQUESTS_CA_BUNDLE from the environment
    with s:
        yield s


@dataclass
class Raw:
    status: int
    headers: http.client.HTTPMessage
    body: bytes
    complete: bool  # the whole announced Content-Length arrived


def fetch(url: str, *, method: str = "GET", headers: dict | None = None,
          timeout: float = 5.0) -> Raw:
    """One request over a fresh http.client connection; no decoding, no redirects; a
    short body (connection dropped) is returned with complete=False."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, parts.path or "/", headers=headers or {})
        resp = conn.getresponse()
        try:
            body, complete = resp.read(), True
        except http.client.IncompleteRead as exc:
            body, complete = exc.partial, False
        return Raw(resp.status, resp.headers, body, complete)
    finally:
        conn.close()


# --------------------------------------------------------------------------- basics


def test_full_get_has_validators_and_length(server, session):
    r = session.get(server.url_for("f.bin"))
    assert r.status_code == 200
    assert r.content == DATA
    assert r.headers["Content-Length"] == str(SIZE)
    assert r.headers["Accept-Ranges"] == "bytes"
    assert r.headers["ETag"] == '"' + hashlib.sha1(DATA).hexdigest() + '"'
    assert r.headers["Last-Modified"] == server.last_modified("f.bin")
    assert server.url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize(
    ("spec", "start", "end"),
    [
        ("bytes=0-9", 0, 9),
        ("bytes=100-199", 100, 199),
        ("bytes=1000-", 1000, SIZE - 1),
        ("bytes=-24", SIZE - 24, SIZE - 1),
        ("bytes=1000-99999", 1000, SIZE - 1),  # end past EOF is clipped
        ("bytes=-99999", 0, SIZE - 1),  # suffix longer than the file: all of it
        ("bytes=1023-1023", SIZE - 1, SIZE - 1),
    ],
)
def test_single_ranges_give_206(server, session, spec, start, end):
    r = session.get(server.url_for("f.bin"), headers={"Range": spec})
    assert r.status_code == 206
    assert r.headers["Content-Range"] == f"bytes {start}-{end}/{SIZE}"
    assert r.headers["Content-Length"] == str(end - start + 1)
    assert r.content == DATA[start:end + 1]


@pytest.mark.parametrize("spec", ["bytes=1024-", "bytes=5000-6000", "bytes=10-5", "bytes=-0"])
def test_unsatisfiable_ranges_give_416(server, session, spec):
    r = session.get(server.url_for("f.bin"), headers={"Range": spec})
    assert r.status_code == 416
    assert r.headers["Content-Range"] == f"bytes */{SIZE}"


def test_any_range_of_an_empty_file_is_unsatisfiable(server, session):
    server.put("empty", b"")
    assert session.get(server.url_for("empty")).content == b""
    r = session.get(server.url_for("empty"), headers={"Range": "bytes=0-"})
    assert r.status_code == 416
    assert r.headers["Content-Range"] == "bytes */0"


@pytest.mark.parametrize("spec", ["bytes=0-1,5-6", "bytes=abc", "items=0-5", "bytes=-"])
def test_multi_and_invalid_ranges_are_ignored(server, session, spec):
    r = session.get(server.url_for("f.bin"), headers={"Range": spec})
    assert r.status_code == 200
    assert r.content == DATA


def test_if_range_by_etag(server, session):
    url = server.url_for("f.bin")
    etag = server.etag("f.bin")
    r = session.get(url, headers={"Range": "bytes=10-19", "If-Range": etag})
    assert (r.status_code, r.content) == (206, DATA[10:20])
    r = session.get(url, headers={"Range": "bytes=10-19", "If-Range": '"stale"'})
    assert (r.status_code, r.content) == (200, DATA)
    r = session.get(url, headers={"Range": "bytes=10-19", "If-Range": "W/" + etag})
    assert r.status_code == 200, "a weak tag never matches"


def test_if_range_by_date(server, session):
    server.put("dated", DATA, last_modified=1_700_000_000)
    url = server.url_for("dated")
    r = session.get(url, headers={"Range": "bytes=-4", "If-Range": http_date(1_700_000_000)})
    assert (r.status_code, r.content) == (206, DATA[-4:])
    r = session.get(url, headers={"Range": "bytes=-4", "If-Range": http_date(1_700_000_001)})
    assert (r.status_code, r.content) == (200, DATA)


def test_if_range_fails_after_the_file_changed(server, session):
    url = server.url_for("f.bin")
    old_etag, old_date = server.etag("f.bin"), server.last_modified("f.bin")
    server.put("f.bin", DATA)  # the same bytes again are not a change
    assert (server.etag("f.bin"), server.last_modified("f.bin")) == (old_etag, old_date)
    server.put("f.bin", DATA[::-1])  # same second: Last-Modified must still move on
    assert server.etag("f.bin") != old_etag
    assert server.last_modified("f.bin") != old_date
    for validator in (old_etag, old_date):
        r = session.get(url, headers={"Range": "bytes=0-9", "If-Range": validator})
        assert (r.status_code, r.content) == (200, DATA[::-1])


def test_head_matches_get_without_body(server, session):
    url = server.url_for("f.bin")
    r = session.head(url)
    assert r.status_code == 200
    assert r.headers["Content-Length"] == str(SIZE)
    assert r.content == b""
    r = session.head(url, headers={"Range": "bytes=0-9"})
    assert r.status_code == 206
    assert r.headers["Content-Range"] == f"bytes 0-9/{SIZE}"
    assert r.headers["Content-Length"] == "10"
    assert server.requests[-1].body_bytes_sent == 0


def test_unknown_name_is_404_and_removed_files_vanish(server, session):
    assert session.get(server.url_for("nope.bin")).status_code == 404
    server.remove("f.bin")
    assert session.get(server.url_for("f.bin")).status_code == 404


@pytest.mark.parametrize("name", ["with space.bin", "données-ü.npz", "sub/dir/x.gz"])
def test_names_are_percent_decoded(server, session, name):
    server.put(name, b"payload " + name.encode())
    url = server.url_for(name)
    assert "%" in url or "/" in name
    r = session.get(url + "?ignored=1")
    assert (r.status_code, r.content) == (200, b"payload " + name.encode())
    assert server.data_requests(name)[-1].name == name


def test_request_records(server, session):
    url = server.url_for("f.bin")
    session.get(url, headers={"Range": "bytes=0-99", "X-Test": "one"})
    session.head(url)
    session.get(url)
    session.get(server.url_for("other"))
    gets = server.data_requests("f.bin")
    assert [r.status for r in gets] == [206, 200]
    assert gets[0].headers["range"] == "bytes=0-99"
    assert gets[0].headers.get("x-test") == "one"
    assert gets[0].range == "bytes=0-99"
    assert [r.method for r in server.requests] == ["GET", "HEAD", "GET", "GET"]
    assert server.requests[-1].status == 404
    assert server.bytes_sent == 100 + SIZE + len(b"404 Not Found\n")


def test_keep_alive_reuses_one_connection(server, session):
    for _ in range(3):
        assert session.get(server.url_for("f.bin")).status_code == 200
    assert len({r.client for r in server.requests}) == 1


# --------------------------------------------------------------------------- faults


def test_close_after_sends_n_bytes_then_drops(server):
    server.add_fault(CloseAfter(100))
    raw = fetch(server.url_for("f.bin"))
    assert raw.status == 200
    assert raw.headers["Content-Length"] == str(SIZE)
    assert (raw.body, raw.complete) == (DATA[:100], False)
    assert server.requests[-1].fault == "CloseAfter"
    assert fetch(server.url_for("f.bin")).body == DATA  # one-shot


def test_close_after_with_reset_breaks_a_streaming_client(server, session):
    server.add_fault(CloseAfter(10, reset=True))
    with pytest.raises(requests.exceptions.RequestException):
        session.get(server.url_for("f.bin")).content
    assert server.requests[-1].body_bytes_sent == 10


def test_stall_after_keeps_socket_open_and_silent(server):
    server.add_fault(StallAfter(5, seconds=30))
    parts = urlsplit(server.url_for("f.bin"))
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=0.3)
    try:
        conn.request("GET", parts.path, headers={"Range": "bytes=100-199"})
        resp = conn.getresponse()
        assert resp.status == 206
        assert resp.read(5) == DATA[100:105]
        with pytest.raises(socket.timeout):
            resp.read(1)
    finally:
        conn.close()
    assert server.requests[-1].body_bytes_sent == 5


def test_delay_answers_normally_afterwards(server, session):
    server.add_fault(Delay(0.05))
    r = session.get(server.url_for("f.bin"))
    assert (r.status_code, r.content) == (200, DATA)
    assert server.requests[-1].fault == "Delay"


def test_status_fault_with_retry_after_is_one_shot(server, session):
    server.add_fault(Status(503, retry_after=7, headers={"X-Why": "busy"}))
    r = session.get(server.url_for("f.bin"))
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "7"
    assert r.headers["X-Why"] == "busy"
    assert session.get(server.url_for("f.bin")).status_code == 200


@pytest.mark.parametrize("code", [500, 429, 404, 403, 410])
def test_status_fault_codes(server, session, code):
    server.add_fault(Status(code))
    assert session.get(server.url_for("f.bin")).status_code == code


def test_status_416_carries_the_size(server, session):
    server.add_fault(Status(416))
    r = session.get(server.url_for("f.bin"), headers={"Range": "bytes=0-9"})
    assert r.status_code == 416
    assert r.headers["Content-Range"] == f"bytes */{SIZE}"


def test_ignore_range_fault_is_one_full_answer(server, session):
    server.add_fault(IgnoreRange())
    url = server.url_for("f.bin")
    r = session.get(url, headers={"Range": "bytes=10-19"})
    assert (r.status_code, r.content) == (200, DATA)
    assert "Content-Range" not in r.headers
    assert session.get(url, headers={"Range": "bytes=10-19"}).status_code == 206


def test_wrong_content_range_sends_a_shifted_range(server, session):
    server.add_fault(WrongContentRange())
    r = session.get(server.url_for("f.bin"), headers={"Range": "bytes=100-199"})
    assert r.status_code == 206
    assert r.headers["Content-Range"] == f"bytes 101-200/{SIZE}"
    assert r.content == DATA[101:201]
    server.add_fault(WrongContentRange(shift=8))
    r = session.get(server.url_for("f.bin"), headers={"Range": "bytes=-4"})
    assert r.headers["Content-Range"] == f"bytes {SIZE - 12}-{SIZE - 9}/{SIZE}"
    assert r.content == DATA[SIZE - 12:SIZE - 8]


def test_long_content_length_announces_more_than_it_sends(server):
    server.add_fault(LongContentLength(50))
    raw = fetch(server.url_for("f.bin"))
    assert raw.headers["Content-Length"] == str(SIZE + 50)
    assert (raw.body, raw.complete) == (DATA, False)


def test_gzip_fault_compresses_the_requested_slice(server):
    server.add_fault(Gzip())
    raw = fetch(server.url_for("f.bin"), headers={"Range": "bytes=10-509"})
    assert raw.status == 206
    assert raw.headers["Content-Encoding"] == "gzip"
    assert raw.headers["Content-Range"] == f"bytes 10-509/{SIZE}"
    assert raw.headers["Content-Length"] == str(len(raw.body))
    assert raw.body != DATA[10:510]
    assert gzip.decompress(raw.body) == DATA[10:510]


def test_redirect_relative_and_absolute(server, session):
    server.put("target.bin", b"moved here")
    server.add_fault(Redirect("/target.bin", path="f.bin"))
    r = session.get(server.url_for("f.bin"))
    assert r.content == b"moved here"
    assert r.history[0].status_code == 302
    server.add_fault(Redirect(server.url_for("target.bin"), code=301, path="f.bin"))
    r = session.get(server.url_for("f.bin"))
    assert (r.history[0].status_code, r.content) == (301, b"moved here")
    assert session.get(server.url_for("f.bin")).content == DATA


def test_persistent_redirect_and_loop(server, session):
    server.put("target.bin", b"moved here")
    server.set_redirect("f.bin", server.url_for("target.bin"), code=307)
    for _ in range(2):
        assert session.get(server.url_for("f.bin")).content == b"moved here"
    server.clear_redirect("f.bin")
    assert session.get(server.url_for("f.bin")).content == DATA
    session.max_redirects = 5
    with pytest.raises(requests.TooManyRedirects):
        session.get(server.loop_url)
    r = session.get(server.loop_url, allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"] == urlsplit(server.loop_url).path


def test_change_content_replaces_the_file_before_answering(server, session):
    url = server.url_for("f.bin")
    old_etag = server.etag("f.bin")
    new = b"new content" * 10
    server.add_fault(ChangeContent(new))
    r = session.get(url, headers={"Range": "bytes=0-9", "If-Range": old_etag})
    assert (r.status_code, r.content) == (200, new)
    assert r.headers["ETag"] != old_etag
    assert session.get(url).content == new


def test_wrong_bytes_corrupts_one_byte(server, session):
    server.add_fault(WrongBytes())
    r = session.get(server.url_for("f.bin"), headers={"Range": "bytes=0-99"})
    assert r.status_code == 206
    assert r.headers["Content-Range"] == f"bytes 0-99/{SIZE}"
    assert len(r.content) == 100
    assert sum(a != b for a, b in zip(r.content, DATA[:100])) == 1


def test_fault_filters_and_fifo_order(server, session):
    server.put("g.bin", b"g" * 10)
    server.add_fault(Status(500, path="g.bin"))
    server.add_fault(Status(501, only_ranged=True))
    server.add_fault(Status(502))
    server.add_fault(Status(503, method="HEAD"))
    assert session.get(server.url_for("f.bin")).status_code == 502  # not g, not ranged
    assert session.get(server.url_for("f.bin"), headers={"Range": "bytes=0-1"}).status_code == 501
    assert session.get(server.url_for("f.bin")).status_code == 200  # only g/HEAD faults left
    assert session.head(server.url_for("f.bin")).status_code == 503
    assert session.get(server.url_for("/g.bin")).status_code == 500
    assert server.pending_faults == []


def test_head_does_not_consume_body_faults(server, session):
    server.add_fault(CloseAfter(3))
    assert session.head(server.url_for("f.bin")).status_code == 200
    assert len(server.pending_faults) == 1
    assert fetch(server.url_for("f.bin")).body == DATA[:3]


# --------------------------------------------------------------------------- switches


def test_ignore_range_switch(server, session):
    server.ignore_range = True
    for _ in range(2):
        r = session.get(server.url_for("f.bin"), headers={"Range": "bytes=0-9"})
        assert (r.status_code, r.content) == (200, DATA)


def test_accept_ranges_off(server, session):
    server.accept_ranges = False
    r = session.get(server.url_for("f.bin"), headers={"Range": "bytes=0-9"})
    assert (r.status_code, r.content) == (200, DATA)
    assert "Accept-Ranges" not in r.headers


def test_validators_can_be_withheld(server, session):
    url = server.url_for("f.bin")
    etag, date = server.etag("f.bin"), server.last_modified("f.bin")
    server.send_etag = False
    r = session.get(url, headers={"Range": "bytes=0-9", "If-Range": etag})
    assert "ETag" not in r.headers and r.status_code == 200
    assert session.get(url, headers={"Range": "bytes=0-9", "If-Range": date}).status_code == 206
    server.send_last_modified = False
    r = session.get(url, headers={"Range": "bytes=0-9", "If-Range": date})
    assert "Last-Modified" not in r.headers and r.status_code == 200
    assert session.get(url, headers={"Range": "bytes=0-9"}).status_code == 206


def test_rate_throttle_paces_with_sleeps(server, session):
    payload = os.urandom(40_000)
    server.put("slow.bin", payload)
    server.rate = 100_000
    assert session.get(server.url_for("slow.bin")).content == payload
    assert server.throttle_slept > 0
    assert server.data_requests("slow.bin")[0].body_bytes_sent == len(payload)


# --------------------------------------------------------------------------- concurrency


def test_sixteen_parallel_ranges_reassemble(server):
    payload = os.urandom(1 << 20)
    server.put("big.bin", payload)
    parts = urlsplit(server.url_for("big.bin"))
    n = 16
    step = len(payload) // n
    opened, finished = threading.Barrier(n, timeout=10), threading.Barrier(n, timeout=10)

    def get_segment(i: int) -> bytes:
        start = i * step
        end = len(payload) - 1 if i == n - 1 else start + step - 1
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            conn.connect()
            opened.wait()
            conn.request("GET", parts.path, headers={"Range": f"bytes={start}-{end}"})
            resp = conn.getresponse()
            assert resp.status == 206
            body = resp.read()
            finished.wait()  # keep every connection open until all are served
            return body
        finally:
            conn.close()

    with ThreadPoolExecutor(n) as pool:
        segments = list(pool.map(get_segment, range(n)))
    assert b"".join(segments) == payload
    assert server.peak_connections == n
    assert len(server.data_requests("big.bin")) == n


# --------------------------------------------------------------------------- TLS & silent


def test_tls_origin_trusted_only_with_its_ca(session):
    with OriginServer(tls=True) as srv:
        srv.put("f.bin", DATA)
        assert srv.url.startswith("https://127.0.0.1:")
        assert srv.ca_path is not None and srv.ca_path.read_text().startswith("-----BEGIN")
        r = session.get(srv.url_for("f.bin"), headers={"Range": "bytes=0-9"},
                        verify=str(srv.ca_path))
        assert (r.status_code, r.content) == (206, DATA[:10])
        with pytest.raises(requests.exceptions.SSLError):
            session.get(srv.url_for("f.bin"), verify=True)
        ctx = ssl.create_default_context(cafile=str(srv.ca_path))
        for hostname in ("127.0.0.1", "localhost"):  # both names are in the certificate
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as raw, \
                    ctx.wrap_socket(raw, server_hostname=hostname) as tls:
                assert tls.version() is not None
        ca_path = srv.ca_path
    assert not ca_path.exists(), "certificates are removed on stop"


def test_silent_server_causes_read_timeout(session):
    with SilentServer() as silent:
        with pytest.raises(requests.exceptions.ReadTimeout):
            session.get(silent.url_for("x"), timeout=(2, 0.2))
        assert silent.connections == 1


def test_stop_is_prompt_with_open_keep_alive_and_stalled_connections(session):
    srv = OriginServer().start()
    srv.put("f.bin", DATA)
    session.get(srv.url_for("f.bin"))  # leaves a pooled keep-alive connection
    srv.add_fault(StallAfter(1, seconds=60))
    parts = urlsplit(srv.url_for("f.bin"))
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    conn.request("GET", parts.path)
    resp = conn.getresponse()
    assert resp.read(1) == DATA[:1]
    srv.stop()  # must wake the stalled writer rather than wait 60 s
    assert srv.open_connections == 0
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        resp.read()
    conn.close()
    with pytest.raises(requests.ConnectionError):
        session.get(srv.url_for("f.bin"), timeout=2)


# --------------------------------------------------------------------------- nginx


@pytest.fixture
def nginx_root(tmp_path):
    # No skip: nginx is a required test dependency (tests/run.sh installs it).
    assert nginx_binary() is not None, "nginx is not installed: apt-get install nginx"
    root = tmp_path / "www"
    root.mkdir()
    (root / "data.bin").write_bytes(DATA)
    (root / "with space.bin").write_bytes(b"spaced")
    return root


def test_nginx_serves_ranges(nginx_root, session):
    with NginxServer(nginx_root) as ngx:
        assert ngx.url.startswith("http://127.0.0.1:")
        r = session.get(ngx.url_for("data.bin"), headers={"Range": "bytes=100-199"})
        assert r.status_code == 206
        assert r.headers["Content-Range"] == f"bytes 100-199/{SIZE}"
        assert r.content == DATA[100:200]
        etag = r.headers["ETag"]
        r = session.get(ngx.url_for("data.bin"), headers={"Range": "bytes=-10", "If-Range": etag})
        assert (r.status_code, r.content) == (206, DATA[-10:])
        assert session.get(ngx.url_for("with space.bin")).content == b"spaced"
        assert session.get(ngx.url_for("missing")).status_code == 404
        prefix = ngx.prefix
    assert not prefix.exists()


def test_nginx_limit_rate_is_configured(nginx_root, session):
    with NginxServer(nginx_root, limit_rate="500k") as ngx:
        assert "limit_rate 500k;" in (ngx.prefix / "nginx.conf").read_text()
        assert session.get(ngx.url_for("data.bin")).content == DATA
