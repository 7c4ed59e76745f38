"""What ``ensure()`` raises when many files of a list fail: one short line, and where every
file went. The message joined every failed file's text: an interrupt of a 300-file list was an
8.6 kB line in the notebook's traceback (each "f123.bin: not started (stopped)"), and the
files that were placed before it could only be guessed (the results were lost with the raise).
"""

from __future__ import annotations

import pytest

import prefetch


def test_many_failures_are_one_short_line_and_the_error_holds_every_result(origin, home, tmp_path):
    urls = []
    for i in range(5):
        origin.put(f"ok{i}.bin", bytes([i]) * 5000)
        urls.append(origin.url_for(f"ok{i}.bin"))
    urls += [origin.url_for(f"missing-{i:02}.bin") for i in range(40)]  # 404s
    out = tmp_path / "out"
    with pytest.raises(prefetch.PrefetchError) as caught:
        prefetch.ensure([], urls=urls, output_dir=str(out), retries=0, progress=False)
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert len(message) < 1000, f"{len(message)} characters: {message[:300]}..."
    assert "missing-00.bin" in message and "37 more" in message  # the first three, and how many more
    results = caught.value.results
    assert len(results) == 45
    placed = sorted(r.path for r in results if r.status in ("downloaded", "cached"))
    assert placed == [str(out / f"ok{i}.bin") for i in range(5)]
    assert sorted(p.name for p in out.iterdir()) == [f"ok{i}.bin" for i in range(5)]


def test_a_few_failures_are_each_said(origin, home, tmp_path):
    urls = [origin.url_for(f"missing-{i}.bin") for i in range(3)]
    with pytest.raises(prefetch.PrefetchError) as caught:
        prefetch.ensure([], urls=urls, output_dir=str(tmp_path), retries=0, progress=False)
    assert all(f"missing-{i}.bin" in str(caught.value) for i in range(3))
    assert "more" not in str(caught.value)
    assert len(caught.value.results) == 3


def test_as_completed_keep_going_ends_with_one_short_line(origin, home, tmp_path):
    urls = []
    for i in range(3):
        origin.put(f"ok{i}.bin", bytes([i]) * 5000)
        urls.append(origin.url_for(f"ok{i}.bin"))
    urls += [origin.url_for(f"missing-{i:02}.bin") for i in range(40)]
    stream = prefetch.as_completed([], urls=urls, output_dir=str(tmp_path), keep_going=True, retries=0,
                                   progress=False)
    got = []
    with pytest.raises(prefetch.PrefetchError) as caught:
        for path in stream:
            got.append(path.name)
    assert sorted(got) == [f"ok{i}.bin" for i in range(3)]
    message = str(caught.value)
    assert message.startswith("40 file(s) failed: ") and "37 more" in message
    assert len(message) < 1000, f"{len(message)} characters: {message[:300]}..."
    assert len(stream.failed) == 40


def test_wait_for_a_job_of_many_failed_files_is_one_short_line(origin, home, tmp_path):
    urls = [origin.url_for(f"missing-{i:02}.bin") for i in range(40)]
    job = prefetch.ensure([], urls=urls, output_dir=str(tmp_path), retries=0, background=True)
    with pytest.raises(prefetch.PrefetchError) as caught:
        prefetch.wait(job.id, timeout=120, progress=False)
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert len(message) < 1000, f"{len(message)} characters: {message[:300]}..."
    assert f"job {job.id}" in message and "37 more" in message
