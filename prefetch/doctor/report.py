"""What ``prefetch doctor`` reports: a line per check (ok / info / warn / fail, what is
wrong and what to do), the report, a URL's reachability. Data only; imports nothing of prefetch."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Level(str, Enum):
    """How a check turned out."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    topic: str
    level: Level
    message: str
    hint: str = ""  # what to do (empty when nothing needs doing)


@dataclass(frozen=True)
class DoctorReport:
    """All checks, in the order they were made."""

    checks: tuple[Check, ...] = field(default_factory=tuple)
    sources: tuple = field(default_factory=tuple)  # doctor_sources.SourceVerdict, one per dataset source

    @property
    def failed(self) -> bool:
        """True when something is wrong (exit 1)."""
        return any(c.level is Level.FAIL for c in self.checks)


@dataclass(frozen=True)
class Reachability:
    """Whether a URL answered within the deadline."""

    url: str
    ok: bool
    detail: str  # HTTP status and latency, or the error
