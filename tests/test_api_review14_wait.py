"""``wait(URL)`` for a URL a background job fetches into ``output_dir`` (or as a ``urls=``
entry): it found no job for an entry, and checked the URL's file in the cwd rather than where
the job puts it, so it raised ``NotDownloadedError`` ("no job is fetching it") at once while
the job was still downloading it."""

from __future__ import annotations

import os

import prefetch


def test_wait_for_a_url_waits_for_the_job_that_fetches_it_where_it_puts_it(origin, home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = {n: os.urandom(300_000) for n in ("a.bin", "b.bin")}
    for name, blob in data.items():
        origin.put(name, blob)
    origin.total_rate = 200_000  # ~3 s for both: wait() finds them running
    out = tmp_path / "out"
    by_name = prefetch.ensure(origin.url_for("a.bin"), output_dir=str(out), background=True)
    by_entry = prefetch.ensure([], urls=[{"url": origin.url_for("b.bin"), "out": "renamed.bin"}],
                               output_dir=str(out), background=True)
    first = prefetch.wait(origin.url_for("a.bin"), timeout=60, progress=False)
    assert [j.id for j in first.jobs] == [by_name.id]
    assert first.datasets == [origin.url_for("a.bin")]
    assert (out / "a.bin").read_bytes() == data["a.bin"]
    second = prefetch.wait(origin.url_for("b.bin"), timeout=60, progress=False)
    assert [j.id for j in second.jobs] == [by_entry.id]
    assert (out / "renamed.bin").read_bytes() == data["b.bin"]
    assert not (tmp_path / "a.bin").exists() and not (tmp_path / "b.bin").exists()
