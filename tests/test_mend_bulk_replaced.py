"""The bulk lane renames a chunk's ``.part``s only if each is still the file its writer wrote,
with the size written (the usual path's check, ``flow/partials.check_size``): a ``.part``
another process replaced or cut short between the chunk's writes and its renames is never
placed. The other process acts on the DONE event of a file the same chunk placed just before
(the chunk's renames go one by one). Real keep-alive origin on 127.0.0.1, the real API in-process."""

from __future__ import annotations

import hashlib
import os

import pytest

from prefetch.model.events import EventKind
from tests.bulk_origin import BulkOrigin

COUNT = 120
SIZE = 16 << 10


@pytest.mark.parametrize("how", ["replace", "truncate"])
def test_a_part_changed_before_the_lane_renames_it_is_never_placed(home, tmp_path, monkeypatch, how):
    import prefetch
    from prefetch.errors import ExitCode, PrefetchError

    monkeypatch.setenv("PREFETCH_BULK", "1")
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * (SIZE // 32) for i in range(COUNT)}
    out = tmp_path / "out"
    changed: dict[str, bytes] = {}

    def meddle(event) -> None:
        if changed or event.kind != EventKind.DONE:
            return
        later = [out / f"{name}.part" for name in files if (out / f"{name}.part").exists()]
        if len(later) < 2:
            return
        part = later[-1]  # a .part of the chunk being placed, not renamed yet
        if how == "replace":
            other = tmp_path / "other"
            other.write_bytes(b"another process's file")
            os.replace(other, part)
            changed[part.name[:-5]] = b"another process's file"
        else:
            os.truncate(part, 100)
            changed[part.name[:-5]] = b""

    with BulkOrigin(files) as origin:
        urls = [origin.url_for(name) for name in files]
        try:
            prefetch.ensure(urls, output_dir=str(out), on_event=meddle, progress=False)
            error = None
        except PrefetchError as exc:
            error = exc
        assert origin.lane(), "the lane took part"
    assert changed, "no .part met between the chunk's writes and its renames"
    (name,) = changed
    assert not (out / name).exists(), f"{name}: a .part another process changed was placed"
    assert error is not None and error.exit_code == ExitCode.FILESYSTEM, error
    assert name in str(error) and ("replaced" in str(error) or "truncated" in str(error)), error
    if how == "replace":
        assert (out / f"{name}.part").read_bytes() == changed[name], "the other process's file is left alone"
    for other in files:
        if other != name:
            assert (out / other).read_bytes() == files[other], other
