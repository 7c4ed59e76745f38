"""The twelfth sitting's mend: a team store that accepts connections and never answers must not
hold up a stopped run (a streaming loop left early, Ctrl-C): the stop ends the run within about
a second, and nothing is placed or claimed from the store calls it left behind."""

from __future__ import annotations

import socket
import threading

import prefetch
from tests.test_store import MIB, payload, registry


class HungStore:
    """A TCP server on 127.0.0.1 that accepts and reads every request and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests = 0
        self.conns: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            if conn.recv(65536):
                self.requests += 1
            while conn.recv(65536):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone leaves it listening)
        except OSError:
            pass
        self.sock.close()
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def _store_env(monkeypatch, store: HungStore) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", store.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "mend12")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "mend12-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("PREFETCH_READ_TIMEOUT", "600")  # the store would hold the run for as long


def _store_calls() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "prefetch-store-call" and t.is_alive()]


def test_leaving_a_seeding_stream_does_not_wait_for_a_hung_store(origin, tmp_path, home, monkeypatch):
    """The HEAD before the file's download never gets an answer; close() must end the run
    (the download thread done), not wait out botocore's read timeout or its own 30 s join."""
    data = payload(MIB, 1231)
    origin.put("f.bin", data)
    reg = registry(tmp_path / "r.toml", {"f.bin": (origin.url_for("f.bin"), data)})
    store = HungStore()
    try:
        _store_env(monkeypatch, store)
        paths = prefetch.as_completed(["toy"], registry=reg, seed="s3://team/hung/", progress=False)
        while store.requests == 0:  # the HEAD is in the store's hands
            assert paths._thread.is_alive()
            threading.Event().wait(0.05)
        paths.close()
        assert not paths._thread.is_alive()  # close() saw the run end, not its 30 s join timeout
    finally:
        store.close()  # the abandoned HEAD now fails: nothing may come of it
    for thread in _store_calls():
        thread.join(timeout=30)
    assert not _store_calls()
    assert not (home / ".keras" / "datasets" / "f.bin").exists()


class _FakeS3:
    """An S3 endpoint on 127.0.0.1 whose answers :meth:`answer` (a subclass's) decides, each
    request's body read first; ``release`` is set on ``close`` (a request waiting on it ends)."""

    def __init__(self) -> None:
        import http.server

        from tests.helpers import serve_in_thread

        fake = self
        self.release = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                fake.answer(self)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer

            def log_message(self, *args) -> None:
                pass

        self.server, self.url = serve_in_thread(Handler)

    def answer(self, request) -> None:
        raise NotImplementedError

    @staticmethod
    def reply(request, status: int, *, etag: bool = True) -> None:
        request.send_response(status)
        if etag:
            request.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
        request.send_header("Content-Length", "0")
        request.end_headers()

    def close(self) -> None:
        from tests.helpers import stop_server

        self.release.set()
        stop_server(self.server)


class StoreThatHangsAfterTheClaim(_FakeS3):
    """Objects are absent (HEAD 404), the bucket is there, a claim PUT succeeds; after the claim
    and the HEAD that follows it, every request hangs until ``close``."""

    def __init__(self) -> None:
        self.hang = threading.Event()
        self.hung = 0
        self.claims = 0
        self.after_claim = 0
        super().__init__()

    def answer(self, request) -> None:
        if self.hang.is_set() and self.after_claim >= 1:
            self.hung += 1
            self.release.wait()
            request.close_connection = True
            return
        if request.command == "PUT" and ".prefetch-claims/" in request.path:
            self.claims += 1
            self.hang.set()
            self.after_claim = 0
            self.reply(request, 200)
            return
        if self.hang.is_set():
            self.after_claim += 1
        self.reply(request, 404 if request.command == "HEAD" else 200, etag=False)


def test_leaving_a_stream_while_seeding_to_a_hung_store(origin, tmp_path, home, monkeypatch):
    """The file downloaded and placed, its seeding's HEAD hangs: close() ends the run (the file
    stays placed and whole; no upload is started later from the abandoned call)."""
    data = payload(MIB, 1232)
    origin.put("f.bin", data)
    reg = registry(tmp_path / "r.toml", {"f.bin": (origin.url_for("f.bin"), data)})
    store = StoreThatHangsAfterTheClaim()
    try:
        _store_env(monkeypatch, store)
        paths = prefetch.as_completed(["toy"], registry=reg, seed="s3://team/hung/", progress=False)
        while store.hung == 0:  # the claim taken, the file fetched from the origin; seeding asks the store
            assert paths._thread.is_alive()
            threading.Event().wait(0.05)
        paths.close()
        assert not paths._thread.is_alive()  # close() saw the run end, not its 30 s join timeout
    finally:
        store.close()
    for thread in _store_calls():
        thread.join(timeout=60)
    assert not _store_calls()
    assert store.claims == 1
    assert (home / ".keras" / "datasets" / "f.bin").read_bytes() == data


class StoreSlowToClaim(_FakeS3):
    """Objects are absent (HEAD 404); a claim PUT is answered (200) only once ``answer_claim``
    is set; DELETEs of claims are counted."""

    def __init__(self) -> None:
        self.answer_claim = threading.Event()
        self.claims = 0
        self.deleted: list[str] = []
        super().__init__()

    def answer(self, request) -> None:
        status = 404 if request.command == "HEAD" else 200
        if ".prefetch-claims/" in request.path and request.command == "PUT":
            self.claims += 1
            self.answer_claim.wait(60)
        if ".prefetch-claims/" in request.path and request.command == "DELETE":
            self.deleted.append(request.path)
            status = 204
        self.reply(request, status)

    def close(self) -> None:
        self.answer_claim.set()
        super().close()


def test_a_claim_the_store_grants_after_the_stop_is_released(origin, tmp_path, home, monkeypatch):
    """The run stops while the store sits on its claim PUT; the store then grants it: the call
    left behind releases the claim (other seeders need not wait out its lease) and nothing is
    downloaded for it."""
    data = payload(MIB, 1233)
    origin.put("f.bin", data)
    reg = registry(tmp_path / "r.toml", {"f.bin": (origin.url_for("f.bin"), data)})
    store = StoreSlowToClaim()
    try:
        _store_env(monkeypatch, store)
        paths = prefetch.as_completed(["toy"], registry=reg, seed="s3://team/hung/", progress=False)
        while store.claims == 0:
            assert paths._thread.is_alive()
            threading.Event().wait(0.05)
        paths.close()
        assert not paths._thread.is_alive()
        store.answer_claim.set()  # the claim is granted now, to a run that has stopped
        for thread in _store_calls():
            thread.join(timeout=60)
        assert not _store_calls()
        assert store.deleted == ["/team/hung/.prefetch-claims/f.bin"], store.deleted
    finally:
        store.close()
    assert not (home / ".keras" / "datasets" / "f.bin").exists()
