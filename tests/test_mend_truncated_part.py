"""A ``.part`` cut short by another process while the download writes into it (``truncate``,
``: > file.part``) is never placed: the later writes would fill the file back to its size with
a hole of zeros where the cut bytes were, and without a hash nothing else catches it (the
replaced-file case is ``test_fs_hostile``'s). Real origin on 127.0.0.1, the real API in-process."""

from __future__ import annotations

import os
import random

import pytest

from prefetch.errors import ExitCode
from tests.test_fs_hostile import tamper_mid_download

MiB = 1 << 20


@pytest.mark.parametrize("connections,cut_to", [(1, 0), (4, 0), (1, 512 << 10)])
def test_a_part_truncated_mid_download_is_never_placed(home, origin, tmp_path, connections, cut_to):
    def truncate(part) -> None:
        os.truncate(part, cut_to)  # another process cuts the file; the download keeps writing into it

    error = tamper_mid_download(origin, tmp_path, "cut.bin", truncate, seed=3, connections=connections,
                                after=cut_to)
    assert error.exit_code == ExitCode.FILESYSTEM, error
    assert "truncated" in str(error) and "\n" not in str(error), error


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
