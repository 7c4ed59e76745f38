"""The team store on an S3-compatible object store: locations, the client, object facts.

boto3 is an optional extra (``pip install 'prefetch-datasets[s3]'``) imported only here,
only for ``s3://`` work. Endpoint and credentials come the standard AWS way
(``AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE`` and the shared files); with no credentials at all the store is read
anonymously (public buckets).

Reading goes through the transfer engine like any HTTP source: each object becomes a
presigned GET URL (or a plain one, anonymously). A presigned URL changes every run, so
``rebind_state`` points a saved resume state at this run's URL of the same object.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import quote, urlsplit, urlunsplit

from prefetch.errors import MissingExtraError, StoreError, UsageError

INSTALL_HINT = "s3:// needs boto3: pip install 'prefetch-datasets[s3]'"
PRESIGN_SECONDS = 24 * 3600  # a resumed download gets a fresh URL; shorter lives less in logs


def is_s3_url(text: str) -> bool:
    return text.lower().startswith("s3://")


@dataclass(frozen=True)
class StoreLocation:
    """``s3://BUCKET/PREFIX``: objects are ``PREFIX/<file name>``."""

    bucket: str
    prefix: str  # "" or ends with "/"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key_for(self, name: str) -> str:
        return self.prefix + name

    def url_for(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key_for(name)}"


def parse_store_url(url: str) -> StoreLocation:
    """Split ``s3://BUCKET/PREFIX`` (prefix optional).

    Raises:
        UsageError: not an s3:// URL with a bucket.
    """
    parts = urlsplit(url)
    bucket = parts.netloc
    if parts.scheme.lower() != "s3" or not bucket or "/" in bucket or parts.query or parts.fragment:
        raise UsageError(f"malformed store URL {url!r}: expected s3://BUCKET/PREFIX")
    prefix = parts.path.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return StoreLocation(bucket=bucket, prefix=prefix)


def split_object_url(url: str) -> tuple[StoreLocation, str]:
    """``s3://B/P/name`` -> (location of ``s3://B/P/``, ``name``).

    An object URL names its key raw, as the AWS CLI writes it and as ``push`` and the seeder
    store it: ``s3://b/p/a b#1?.bin`` is the key ``p/a b#1?.bin`` (no query, no fragment, no
    %-escapes), so the object a file is pushed under is the one it is read from.

    Raises:
        UsageError: not an s3:// URL with a bucket.
    """
    if not is_s3_url(url):
        raise UsageError(f"malformed store URL {url!r}: expected s3://BUCKET/KEY")
    bucket, _, key = url[len("s3://"):].partition("/")
    head, _, name = key.lstrip("/").rpartition("/")
    if not bucket or not name:
        raise UsageError(f"malformed store URL {url!r}: expected s3://BUCKET/KEY")
    return StoreLocation(bucket=bucket, prefix=head + "/" if head else ""), name


def require_boto3():
    """Import boto3, or say in one line what to install.

    Raises:
        MissingExtraError: boto3 is not installed (exit 1).
    """
    try:
        import boto3  # noqa: F401
        import botocore  # noqa: F401
    except ImportError:
        raise MissingExtraError(INSTALL_HINT) from None
    return boto3


@dataclass
class Store:
    """A connected store: the boto3 client and whether it signs requests."""

    location: StoreLocation
    client: object
    anonymous: bool
    endpoint: str | None
    _no_bucket: bool | None = None

    def head(self, name: str) -> dict | None:
        """The object's HEAD facts (size, etag, metadata), or None when it is absent.

        Raises:
            StoreError: any other failure (access denied, no such bucket, network).
        """
        try:
            answer = self.client.head_object(Bucket=self.location.bucket, Key=self.location.key_for(name))
        except Exception as exc:  # noqa: BLE001 - botocore's errors are classified here
            if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise store_error(exc, f"HEAD {self.location.url_for(name)}") from None
        return {
            "size": int(answer.get("ContentLength", 0)),
            "etag": answer.get("ETag"),
            "metadata": {k.lower(): v for k, v in (answer.get("Metadata") or {}).items()},
        }

    def lacks_bucket(self) -> bool:
        """True when the store says the bucket itself does not exist (asked once, on a miss)."""
        if self._no_bucket is None:
            try:
                self.client.head_bucket(Bucket=self.location.bucket)
                self._no_bucket = False
            except Exception as exc:  # noqa: BLE001 - only a clear "no such bucket" counts
                self._no_bucket = error_code(exc) in ("404", "NoSuchBucket", "NotFound")
        return self._no_bucket

    def http_url(self, name: str) -> str:
        """A URL the transfer engine can GET (with Range) for object ``name``."""
        return self.client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.location.bucket, "Key": self.location.key_for(name)},
            ExpiresIn=PRESIGN_SECONDS,
        )


def open_store(url: str | StoreLocation, *, env: Mapping[str, str] | None = None, timeouts=None) -> Store:
    """Connect to the store at ``url`` the standard AWS way (anonymous when no credentials).

    ``timeouts``: the client's connect and read timeouts (``engine.options.Timeouts``: a run's,
    ``--timeout`` included); None: ``store_timeouts(env)``.

    Raises:
        MissingExtraError: boto3 is missing. UsageError: malformed URL.
    """
    location = url if isinstance(url, StoreLocation) else parse_store_url(url)
    env = os.environ if env is None else env
    boto3 = require_boto3()
    from botocore import UNSIGNED
    from botocore.config import Config

    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
    try:
        session = boto3.session.Session(profile_name=env.get("AWS_PROFILE") or None)
        credentials = session.get_credentials()
    except Exception as exc:  # noqa: BLE001 - e.g. ProfileNotFound
        raise UsageError(f"AWS configuration: {exc}") from None
    anonymous = credentials is None
    timeouts = store_timeouts(env) if timeouts is None else timeouts
    options = {
        "retries": {"max_attempts": 5, "mode": "standard"},
        "connect_timeout": timeouts.connect,
        "read_timeout": timeouts.read,
    }
    if endpoint:
        # MinIO, SeaweedFS, Ceph RGW and most self-hosted stores want path-style URLs.
        options["s3"] = {"addressing_style": "path"}
    if anonymous:
        options["signature_version"] = UNSIGNED
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or session.region_name or "us-east-1"
    client = session.client("s3", endpoint_url=endpoint, region_name=region, config=Config(**options))
    return Store(location=location, client=client, anonymous=anonymous, endpoint=endpoint)


TIMEOUT_VARIABLES = ("PREFETCH_TIMEOUT", "PREFETCH_READ_TIMEOUT", "PREFETCH_CONNECT_TIMEOUT")


def store_timeouts(env: Mapping[str, str]):
    """The store client's connect and read timeouts: those of every download
    (``PREFETCH_CONNECT_TIMEOUT`` 10 s, ``PREFETCH_READ_TIMEOUT`` 15 s, or a third and half of
    ``PREFETCH_TIMEOUT``), read and checked by the same rules.

    Raises:
        UsageError: one of those variables is not a number more than 0.
    """
    from prefetch.engine.options import TransferOptions

    return TransferOptions.from_env({k: env[k] for k in TIMEOUT_VARIABLES if env.get(k)}).timeouts


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def store_error(exc: BaseException, what: str) -> StoreError:
    """One line for a botocore failure: what was tried and what the store said."""
    code = error_code(exc)
    if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        hint = "; check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
    elif code in ("NoSuchBucket",):
        hint = "; create the bucket or fix the URL"
    else:
        hint = ""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    error = StoreError(f"store: {what}: {text}{hint}")
    error.unavailable = is_unavailable(code) if code else _no_answer(exc)
    return error


def _no_answer(exc: BaseException) -> bool:
    """botocore could not reach the store or got no answer (not a request it refused to make,
    such as an old botocore's ParamValidationError for ``IfNoneMatch``)."""
    from botocore.exceptions import ConnectionError as NoConnection, HTTPClientError

    return isinstance(exc, (NoConnection, HTTPClientError))


UNAVAILABLE = ("SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling",
               "ThrottlingException", "RequestLimitExceeded", "TooManyRequests")


def is_unavailable(code: str) -> bool:
    """The store itself is unwell (a 5xx, throttling after botocore's own retries), as opposed
    to a refusal about one object (403, 404): asking it again for the next file of this run
    only costs that file the same retries."""
    return code.startswith("5") or code in UNAVAILABLE


def identity(url: str) -> str:
    """A URL without its query: the same object's presigned URLs share it."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def rebind_state(state_file: Path, urls: list[str]) -> None:
    """Point a saved resume state's URLs at this run's URLs of the same objects.

    A presigned URL differs each run; without this the engine would not recognise the
    partial download as its own and start over.
    """
    from prefetch.engine.resume_state import load_state, save_state

    state = load_state(state_file)
    if state is None:
        return
    now = {identity(u): u for u in urls}
    changed = False

    def swap(old: str) -> str:
        nonlocal changed
        new = now.get(identity(old), old)
        changed = changed or new != old
        return new

    state.urls = [swap(u) for u in state.urls]
    state.validators = {swap(u): v for u, v in state.validators.items()}
    if changed:
        save_state(state_file, state)


def public_object_url(endpoint: str, location: StoreLocation, name: str) -> str:
    """Path-style URL of an object (what an anonymous reader GETs)."""
    return f"{endpoint.rstrip('/')}/{location.bucket}/{quote(location.key_for(name))}"
