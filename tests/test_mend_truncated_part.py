"""A ``.part`` cut short by another process while the download writes into it (``truncate``,
``: > file.part``) is never placed: the later writes would fill the file back to its size with
a hole of zeros where the cut bytes were, and without a hash nothing else catches it (the
replaced-file case is ``test_fs_hostile``'s). Real origin on 127.0.0.1, the real API in-process."""

from __future__ import annotations

import os
import random

import pytest

from prefetch.errors import ExitCode
from prefetch.model.events import EventKind

MiB = 1 << 20


@pytest.mark.parametrize("connections,cut_to", [(1, 0), (4, 0), (1, 512 << 10)])
def test_a_part_truncated_mid_download_is_never_placed(home, origin, tmp_path, connections, cut_to):
    import prefetch
    from prefetch.errors import PrefetchError

    data = random.Random(3).randbytes(4 * MiB)
    origin.put("cut.bin", data)
    origin.rate = 2_000_000
    out = tmp_path / "out"
    part = out / "cut.bin.part"
    cut = []

    def truncate(event) -> None:
        if not cut and event.kind == EventKind.PROGRESS and event.done and event.done > cut_to and part.exists():
            os.truncate(part, cut_to)  # another process cuts the file; the download keeps writing into it
            cut.append(event.done)

    with pytest.raises(PrefetchError) as caught:
        prefetch.ensure(origin.url_for("cut.bin"), output_dir=str(out), connections=connections, on_event=truncate,
                        progress=False)
    assert cut
    assert caught.value.exit_code == ExitCode.FILESYSTEM, caught.value
    assert "truncated" in str(caught.value) and "\n" not in str(caught.value), caught.value
    assert not (out / "cut.bin").exists()
    origin.rate = None
    results = prefetch.ensure(origin.url_for("cut.bin"), output_dir=str(out), progress=False)
    assert [r.status for r in results] == ["downloaded"]
    assert (out / "cut.bin").read_bytes() == data  # the rerun trusted none of the cut bytes


def test_a_disk_that_fills_mid_download_is_no_cut_and_resumes(home, origin, tmp_path, monkeypatch):
    """A write the full disk refused (or took in part) leaves the file shorter than the range
    asked: that is a full disk (exit 5, 'no space left'), never taken for another process's cut,
    and its file is whole after the next run."""
    import prefetch
    from prefetch.errors import PrefetchError
    from tests.test_disk import Tmpfs

    monkeypatch.setenv("PREFETCH_PREALLOCATE", "0")  # (the disk fills during the writes, not at the start)
    data = random.Random(4).randbytes(6 * MiB)
    origin.put("full.bin", data)
    fs = Tmpfs(tmp_path / "small").mount(size="3m")
    try:
        with pytest.raises(PrefetchError) as caught:
            prefetch.ensure(origin.url_for("full.bin"), output_dir=str(fs.path), connections=4, progress=False)
        assert caught.value.exit_code == ExitCode.FILESYSTEM, caught.value
        assert "no space left" in str(caught.value).lower() and "truncated" not in str(caught.value), caught.value
        fs.remount("size=16m")
        results = prefetch.ensure(origin.url_for("full.bin"), output_dir=str(fs.path), progress=False)
        assert [r.status for r in results] == ["downloaded"]
        assert (fs.path / "full.bin").read_bytes() == data
    finally:
        fs.unmount()
