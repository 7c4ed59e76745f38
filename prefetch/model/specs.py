"""What is known about a file before it is fetched: its sources, its name, its hash.

``FileSpec`` and ``DatasetSpec`` are what every planner produces from a name
(a registry dataset, a URL, a hub file); ``ExpectedHash`` is a checksum to verify.
"""

from __future__ import annotations

from prefetch.errors import BadHashError
from prefetch.model.lean import dataclass

# The name schemes of the hubs and collections (hf/names.py, ms/names.py, cache/nltk_data.py own
# their parsing): here so that a planner can tell its names without importing those modules.
HF_SCHEME = "hf://"
MS_SCHEME = "ms://"
NLTK_SCHEME = "nltk:"


def named_by(text: str, scheme: str) -> bool:
    """Whether ``text`` is a name of ``scheme`` (case-insensitive prefix)."""
    return text[: len(scheme)].lower() == scheme


@dataclass(frozen=True)
class FileSpec:
    """One file of a dataset: where it comes from and where it goes."""

    name: str  # file name at the origin and on flat mirrors
    url: str  # origin URL
    target: str  # path under datasets/ (or absolute for plain URLs)
    expected: ExpectedHash | None = None
    also: tuple[str, ...] = ()  # more names for the same bytes
    extract: tuple[str, ...] = ()  # dirs under datasets/ to extract into
    alternates: tuple[str, ...] = ()  # more URLs of byte-identical copies (checked by the hash)
    size: int | None = None  # bytes, when known: a copy of another size is rejected before hashing
    # The same bytes' hashes in other algorithms (a list's md5 beside its sha256): each checked too.
    more_hashes: tuple[ExpectedHash, ...] = ()

    @property
    def urls(self) -> tuple[str, ...]:
        """The origin, then the documented copies."""
        return (self.url, *self.alternates)

    @property
    def hashes(self) -> tuple[ExpectedHash, ...]:
        """Every hash the file must match, ``expected`` first (none without one)."""
        return (self.expected, *self.more_hashes) if self.expected is not None else ()


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: one or more files."""

    name: str
    description: str
    files: tuple[FileSpec, ...]
    source: str = "built-in"  # which registry file defined it


_HEX = set("0123456789abcdefABCDEF")  # string.hexdigits (the string module costs a regex compile)


_LENGTHS = {64: "sha256", 32: "md5"}
_OTHER_LENGTHS = {40: "sha1", 56: "sha224", 96: "sha384", 128: "sha512"}


@dataclass(frozen=True)
class ExpectedHash:
    """A hash the downloaded bytes must match."""

    algorithm: str  # "sha256" | "md5"
    hexdigest: str  # lower-case
    # Only the first hex digits are known (torch.hub's ``name-<sha256 prefix>.pth``):
    # a digest that starts with them matches, as torch.hub's ``check_hash`` accepts.
    prefix: bool = False

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hexdigest}{'...' if self.prefix else ''}"

    def matches(self, digest: str | None) -> bool:
        """True when ``digest`` (a full hex digest) is the expected one (starts with it, for a prefix)."""
        got = (digest or "").lower()
        return got.startswith(self.hexdigest) if self.prefix else got == self.hexdigest


def parse_hash(text: str, *, algorithm: str = "auto") -> ExpectedHash:
    """Parse a hex digest, detecting the algorithm by length like Keras.

    Accepts ``HEX``, ``sha256:HEX`` or ``md5:HEX`` (also spelled ``sha-256:``, as aria2c and
    SRI do, with spaces after the colon).

    Raises:
        BadHashError: not hex, or a length that fits no supported algorithm; a checksum
            file's line (``HEX  NAME``, ``HEX *NAME``), which names a file besides the hash; a
            prefix naming another algorithm than ``algorithm`` (``--md5 sha256:HEX``).
    """
    value = text.strip().lower()
    if ":" in value:
        named, _, value = value.partition(":")
        named, value = named.strip().replace("-", ""), value.strip()
        if algorithm != "auto" and named != algorithm and named in _LENGTHS.values():  # (``--md5 sha256:HEX``)
            raise BadHashError(f"hash {text!r} says {named} where {algorithm} is expected; give the {algorithm} "
                               f"there, or this hash as {named}")
        algorithm = named
    if not value or not set(value) <= _HEX:
        head, _, name = value.partition(" ")
        if head and set(head) <= _HEX and name.strip():
            raise BadHashError(f"hash {text!r} is a checksum file's line (HASH  NAME), which may be another "
                               f"file's; give the hash alone")
        raise BadHashError(f"hash {text!r} is not hexadecimal; give 64 hex digits (sha256) or 32 (md5)")
    if algorithm == "auto":
        # Keras: 64 hex digits -> sha256, anything else -> md5.
        algorithm = "sha256" if len(value) == 64 else "md5"
    expected_len = {v: k for k, v in _LENGTHS.items()}.get(algorithm)
    if expected_len is None:
        raise BadHashError(f"unsupported hash algorithm {algorithm!r}; use sha256 or md5")
    if len(value) != expected_len:
        other = _OTHER_LENGTHS.get(len(value))
        raise BadHashError(
            f"{algorithm} hash must be {expected_len} hex digits, got {len(value)} in {text!r}"
            + (f" (the length of a {other}, which prefetch does not check: give the sha256 or md5)" if other else "")
        )
    return ExpectedHash(algorithm, value)
