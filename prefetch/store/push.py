"""``prefetch push``: upload verified files to the team store, resumable.

An object appears only whole: small files are one PUT, bigger ones a multipart upload,
which S3 assembles atomically at ``complete``. The upload id is recorded under the
state dir (keyed by the object and the file's sha256 and size) before the first part, so a killed push continues the same upload (parts
already on the store, checked by their ETag = md5, are not sent again). The object's
metadata carries the file's sha256 (and md5); an object with the same sha256 is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from prefetch.errors import LocalFileError
from prefetch.store.s3 import Store, error_code, store_error

DEFAULT_PART_SIZE = 8 * 1024 * 1024  # S3's minimum is 5 MiB (all parts but the last)
MIN_PART_SIZE = 5 * 1024 * 1024


@dataclass
class PushResult:
    """What happened to one file."""

    name: str
    path: str
    url: str  # s3://bucket/key
    status: str  # uploaded | resumed | skipped
    size: int
    sha256: str
    parts_reused: int = 0


def part_size_from_env(env) -> int:
    """``PREFETCH_S3_PART_SIZE`` (bytes, at least 5 MiB), else 8 MiB."""
    try:
        value = int(env.get("PREFETCH_S3_PART_SIZE", DEFAULT_PART_SIZE))
    except ValueError:
        value = DEFAULT_PART_SIZE
    return max(MIN_PART_SIZE, value)


def open_source(path: Path, *, named: bool = False):
    """``path`` opened for reading, never blocking on a FIFO; a cache file (not ``named`` by the
    user) never through a symbolic link another user planted: it would push that link's target.

    Raises:
        UnsafePathError: another user's link (cache files), a FIFO, device or directory. OSError: unreadable.
    """
    from prefetch.fs import safefs

    if not named:
        safefs.check_link_ok(path)  # the user's own link (a dataset kept on another disk) is read through
    return os.fdopen(safefs.open_readable(path), "rb")


def file_digests(path: Path, *, named: bool = False) -> tuple[str, str, int]:
    """(sha256, md5, size) of ``path`` in one read."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
    try:
        with open_source(path, named=named) as f:
            while chunk := f.read(1 << 20):
                sha.update(chunk)
                md5.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise LocalFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    return sha.hexdigest(), md5.hexdigest(), size


def push_file(
    store: Store,
    path: Path,
    name: str,
    *,
    state_dir: Path,
    part_size: int = DEFAULT_PART_SIZE,
    digests: tuple[str, str, int] | None = None,
    on_part: Callable[[int, int], None] | None = None,
    named: bool = False,
    replace: bool = False,
    stop=None,
) -> PushResult:
    """Upload ``path`` as object ``name`` of ``store`` unless an object with its sha256 is there
    (``replace``: even then, as the object's bytes were found not to match its metadata).

    ``stop`` (a ``threading.Event``): once set, a multipart upload stops before its next part,
    resumable (its record is kept; the next push of the file continues it).

    Raises:
        StoreError: the store refused. LocalFileError: the file cannot be read.
        InterruptedTransferError: ``stop`` was set during a multipart upload.
    """
    sha256, md5, size = digests or file_digests(path, named=named)
    url = store.location.url_for(name)
    head = None if replace else store.head(name)
    if head is not None and head["metadata"].get("sha256") == sha256 and head["size"] == size:
        return PushResult(name, str(path), url, "skipped", size, sha256)
    metadata = {"sha256": sha256, "md5": md5}
    bucket, key = store.location.bucket, store.location.key_for(name)
    if size <= part_size:
        try:
            with open_source(path, named=named) as f:
                body = f.read()
            _unchanged(hashlib.sha256(body).hexdigest(), sha256, path, url)
            answer = store.client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata,
                                             ContentMD5=_b64(md5))
        except OSError as exc:
            raise LocalFileError(f"cannot read {path}: {exc.strerror or exc}") from None
        except LocalFileError:
            raise
        except Exception as exc:  # noqa: BLE001 - botocore
            raise store_error(exc, f"PUT {url}") from None
        _answered(store, answer, "ETag", f"PUT {url}")
        return PushResult(name, str(path), url, "uploaded", size, sha256)
    return _multipart(store, path, name, url, metadata, size, part_size, state_dir, on_part, named, stop)


def _multipart(store, path, name, url, metadata, size, part_size, state_dir, on_part, named, stop) -> PushResult:
    bucket, key = store.location.bucket, store.location.key_for(name)
    record_path = _record_path(state_dir, store, key, metadata["sha256"], size)
    record = _load_record(record_path)
    done: dict[int, str] = {}
    if record and record.get("sha256") == metadata["sha256"] and record.get("part_size") == part_size:
        done = _uploaded_parts(store, bucket, key, record["upload_id"])
        if done is None:
            record = None  # the upload is gone (aborted or expired): start a new one
    else:
        record = None
    if record is None:
        try:
            answer = store.client.create_multipart_upload(Bucket=bucket, Key=key, Metadata=metadata)
        except Exception as exc:  # noqa: BLE001
            raise store_error(exc, f"start upload of {url}") from None
        upload_id = _answered(store, answer, "UploadId", f"start upload of {url}")
        record = {"upload_id": upload_id, "sha256": metadata["sha256"], "part_size": part_size}
        _save_record(record_path, record)
        done = {}
    upload_id = record["upload_id"]
    count = (size + part_size - 1) // part_size
    parts, reused = [], 0
    whole = hashlib.sha256()  # of the bytes sent: the file may change after it was hashed
    try:
        with open_source(path, named=named) as f:
            for number in range(1, count + 1):
                if stop is not None and stop.is_set():
                    from prefetch.errors import InterruptedTransferError

                    raise InterruptedTransferError(f"the upload of {url} stopped after {number - 1} of {count} "
                                                   "parts; the next push (or seed) of the file continues it")
                f.seek((number - 1) * part_size)
                chunk = f.read(part_size)
                whole.update(chunk)
                md5 = hashlib.md5(chunk).hexdigest()
                etag = done.get(number)
                if etag is not None and etag.strip('"') == md5:
                    reused += 1
                else:
                    try:
                        answer = store.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                                          PartNumber=number, Body=chunk, ContentMD5=_b64(md5))
                    except Exception as exc:  # noqa: BLE001
                        if _pushed_meanwhile(store, name, metadata["sha256"], size, exc):
                            return PushResult(name, str(path), url, "skipped", size, metadata["sha256"])
                        raise store_error(exc, f"upload part {number}/{count} of {url}") from None
                    etag = _answered(store, answer, "ETag", f"upload part {number}/{count} of {url}")
                parts.append({"PartNumber": number, "ETag": etag})
                if on_part is not None:
                    on_part(number, count)
    except OSError as exc:
        raise LocalFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        _unchanged(whole.hexdigest(), metadata["sha256"], path, url)
    except LocalFileError:
        try:  # the parts are of no use: no object appears, and the store frees them
            store.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except Exception:  # noqa: BLE001 - the store's lifecycle rules end it anyway
            pass
        _forget(record_path)
        raise
    try:
        answer = store.client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                                        MultipartUpload={"Parts": parts})
    except Exception as exc:  # noqa: BLE001
        if _pushed_meanwhile(store, name, metadata["sha256"], size, exc):
            _forget(record_path)
            return PushResult(name, str(path), url, "skipped", size, metadata["sha256"])
        raise store_error(exc, f"complete upload of {url}") from None
    _answered(store, answer, "ETag", f"complete upload of {url}")
    _forget(record_path)
    return PushResult(name, str(path), url, "resumed" if reused else "uploaded", size, metadata["sha256"], reused)


def _pushed_meanwhile(store: Store, name: str, sha256: str, size: int, exc: BaseException) -> bool:
    """The upload is gone because another push of the same file (one that found our upload
    record and joined the upload, on this machine) completed it: the object is there, whole,
    with our sha256. Anything else is the store's error."""
    if error_code(exc) not in ("NoSuchUpload", "404"):
        return False
    try:
        head = store.head(name)
    except Exception:  # noqa: BLE001 - the original error is the one to report
        return False
    return head is not None and head["metadata"].get("sha256") == sha256 and head["size"] == size


def _unchanged(sent: str, hashed: str, path, url: str) -> None:
    """The bytes sent are the ones hashed for the object's metadata, or nothing is stored.

    Raises:
        LocalFileError: ``path`` changed (written to) while it was being uploaded.
    """
    if sent != hashed:
        raise LocalFileError(f"{path} changed while it was being uploaded, so nothing was stored as {url}; "
                             "push it again once it is complete")


def _forget(record_path: Path) -> None:
    try:
        record_path.unlink()
    except OSError:
        pass


def _answered(store: Store, answer, field: str, what: str) -> str:
    """``answer[field]``, which every S3 store sends; without it the endpoint is not one (a web
    server answering 200 to everything) and nothing was stored, whatever its status said.

    Raises:
        StoreError: the field is missing.
    """
    value = answer.get(field) if isinstance(answer, dict) else None
    if not value:
        from prefetch.errors import StoreError

        raise StoreError(f"store: {what}: {store.endpoint or 'the endpoint'} answered without an {field}, "
                         "so it is not an S3 store and nothing was stored; check AWS_ENDPOINT_URL")
    return value


def _uploaded_parts(store, bucket, key, upload_id) -> dict[int, str] | None:
    """Part number -> ETag of an upload in progress, or None when it no longer exists."""
    parts: dict[int, str] = {}
    marker = 0
    while True:
        try:
            answer = store.client.list_parts(Bucket=bucket, Key=key, UploadId=upload_id, PartNumberMarker=marker)
        except Exception as exc:  # noqa: BLE001
            if error_code(exc) in ("NoSuchUpload", "404"):
                return None
            raise store_error(exc, f"list parts of s3://{bucket}/{key}") from None
        for part in answer.get("Parts", []):
            parts[int(part["PartNumber"])] = part["ETag"]
        if not answer.get("IsTruncated"):
            return parts
        marker = int(answer.get("NextPartNumberMarker", 0))


def _b64(md5_hex: str) -> str:
    import base64

    return base64.b64encode(bytes.fromhex(md5_hex)).decode()


def _record_path(state_dir: Path, store: Store, key: str, sha256: str, size: int) -> Path:
    """Where the upload of this file (by sha256 and size) to ``key`` is recorded: pushes of
    different files to one key keep their own uploads (one file's push never takes over, nor
    on completing deletes, another's record; parts are reused only when their md5 is the
    file's anyway)."""
    ident = f"{store.endpoint or 'aws'}\0{store.location.bucket}\0{key}\0{sha256}\0{size}"
    return Path(state_dir) / "push" / (hashlib.sha1(ident.encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".json")


def _load_record(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("upload_id"), str) else None


def _save_record(path: Path, record: dict) -> None:
    from prefetch.fs.files import replace_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, json.dumps(record).encode(), checked=True)
    except OSError as exc:
        raise LocalFileError(f"cannot record the upload in {path}: {exc.strerror or exc}") from None


def local_files(targets: list[str], *, registry, root: Path) -> list[tuple[Path, str, tuple, bool]]:
    """(path, object name, its expected hashes (none for a path), named by the user) for dataset names
    and file paths.

    Raises:
        NotDownloadedError: a dataset file is not in the cache. UsageError: unknown name.
    """
    from prefetch.errors import NotDownloadedError
    from prefetch.cache.plans import plan_files
    from prefetch.fs.paths import expand_path

    found: list[tuple[Path, str, object]] = []
    for target in targets:
        path = expand_path(target, "TARGET")
        if os.sep in target or path.is_file():
            if not path.is_file():
                raise LocalFileError(f"{path} is not a file")
            found.append((path, path.name, (), True))
            continue
        for plan in plan_files(registry.get(target), root=root):
            if not plan.final.is_file():
                raise NotDownloadedError(f"{plan.final} is not in the cache; `prefetch get {target}` first")
            found.append((plan.final, plan.spec.name, plan.spec.hashes, False))
    return found


def push_targets(targets: list[str], dest: str, *, registry, root: Path, state_dir: Path, env,
                 on_result: Callable[[PushResult], None] | None = None) -> list[PushResult]:
    """Verify and upload each target (dataset names, file paths) to the store ``dest``.

    Raises:
        HashMismatchError: a cached file no longer matches its hash (nothing uploaded for it).
        StoreError, LocalFileError, MissingExtraError, UsageError.
    """
    from prefetch.errors import HashMismatchError
    from prefetch.fs.hashing import digest_mismatch
    from prefetch.store.s3 import open_store

    files = local_files(targets, registry=registry, root=root)
    store = open_store(dest, env=env)
    results = []
    for path, name, hashes, named in files:
        digests = file_digests(path, named=named)
        wrong = digest_mismatch({"sha256": digests[0], "md5": digests[1]}, hashes)
        if wrong is not None:  # (each hash: a right sha256 beside a wrong md5 is not the file either)
            raise HashMismatchError(f"{path}: {wrong[0].algorithm} {wrong[1]} is not the expected "
                                    f"{wrong[0].hexdigest}; not uploaded (`prefetch get` replaces it)")
        result = push_file(store, path, name, state_dir=state_dir, part_size=part_size_from_env(env), digests=digests,
                           named=named)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
