"""The Python API given arguments of the wrong type: one ``UsageError`` naming the argument,
raised before anything is downloaded, never a ``TypeError``/``AttributeError`` from deep
inside (``'<' not supported between 'str' and 'int'``) or a nonsense message (``b"mnist"``
read as the names ``'109'``, ``'110'``, ...)."""

from __future__ import annotations

import pytest

import prefetch


@pytest.fixture
def url(origin, home):
    origin.put("a.bin", b"x" * 1000)
    return origin.url_for("a.bin")


BAD_ENSURE = [
    ("names", lambda u: ((123,), {})),
    ("names", lambda u: ((None,), {})),
    ("names", lambda u: ((b"mnist",), {})),
    ("names", lambda u: (([u, 5],), {})),
    ("connections", lambda u: ((u,), {"connections": "4"})),
    ("connections", lambda u: ((u,), {"connections": 2.5})),
    ("sha256", lambda u: ((u,), {"sha256": 5})),
    ("md5", lambda u: ((u,), {"md5": b"00"})),
    ("mirrors", lambda u: ((u,), {"mirror": 5})),
    ("include", lambda u: ((u,), {"include": 5})),
    ("cache_dir", lambda u: ((u,), {"cache_dir": 5})),
    ("output_dir", lambda u: ((u,), {"output_dir": 5})),
    ("extract", lambda u: ((u,), {"extract": "no"})),
    ("force", lambda u: ((u,), {"force": 1})),
    ("urls", lambda u: (([],), {"urls": [5]})),
    ("urls", lambda u: (([],), {"urls": 5})),
    ("headers", lambda u: ((u,), {"headers": [5]})),
    ("timeout", lambda u: ((u,), {"timeout": float("nan")})),
]


@pytest.mark.parametrize("argument, make", BAD_ENSURE, ids=[f"{a}-{i}" for i, (a, _) in enumerate(BAD_ENSURE)])
def test_ensure_and_as_completed_refuse_a_wrong_type_with_one_usage_error(url, origin, tmp_path, monkeypatch,
                                                                          argument, make):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args, options = make(url)
    for call in (prefetch.ensure, prefetch.as_completed):
        with pytest.raises(prefetch.UsageError, match=argument) as caught:
            call(*args, progress=False, **options)
        assert len(str(caught.value).splitlines()) == 1
    assert not origin.requests  # refused before anything was asked of the server
    assert not list(work.iterdir())


def test_one_url_or_entry_given_as_urls_is_one_entry_not_its_characters(url, tmp_path):
    # urls="http://..." was read as the URLs "h", "t", "t", "p", ...: "malformed URL 'h'"
    results = prefetch.ensure([], urls=url, output_dir=str(tmp_path), progress=False)
    assert [r.path for r in results] == [str(tmp_path / "a.bin")]
    results = prefetch.ensure([], urls={"url": url, "out": "b.bin"}, output_dir=str(tmp_path), progress=False)
    assert [r.path for r in results] == [str(tmp_path / "b.bin")]
    # headers as one "Name: value" string is one header, not its characters
    assert prefetch.ensure(url, headers="X-Token: t", output_dir=str(tmp_path), force=True, progress=False)


@pytest.mark.parametrize("call", [
    lambda: prefetch.wait(5),
    lambda: prefetch.wait([b"j0101-abcd"]),
    lambda: prefetch.watch(5),
    lambda: prefetch.remove(5),
    lambda: prefetch.watch(interval=-1),
    lambda: prefetch.watch(interval="1"),
    lambda: prefetch.watch(interval=0),
    lambda: prefetch.watch(timeout="x"),
    lambda: prefetch.watch(timeout=-1),
    lambda: prefetch.as_completed(job="j0101-abcd", interval=-1),
], ids=["wait-int", "wait-bytes", "watch-int", "remove-int", "watch-interval-negative", "watch-interval-str",
        "watch-interval-zero", "watch-timeout-str", "watch-timeout-negative", "follow-interval-negative"])
def test_wait_watch_remove_refuse_a_wrong_type_with_one_usage_error(home, capsys, call):
    with pytest.raises(prefetch.UsageError) as caught:
        call()
    assert len(str(caught.value).splitlines()) == 1
    assert capsys.readouterr().out == ""  # refused before any table was shown


def test_watch_refuses_a_bad_interval_before_showing_a_running_job(origin, home, tmp_path, capsys):
    """The bad interval was only found by time.sleep after the first table: a ValueError."""
    origin.put("slow.bin", b"s" * 200_000)
    origin.total_rate = 100_000
    job = prefetch.ensure(origin.url_for("slow.bin"), background=True, output_dir=str(tmp_path))
    try:
        with pytest.raises(prefetch.UsageError, match="interval"):
            prefetch.watch(job.id, interval=-1)
        assert capsys.readouterr().out == ""
    finally:
        prefetch.wait(job.id, timeout=60, progress=False)


@pytest.mark.parametrize("fname", ["../escaped.bin", "sub/../../escaped.bin", "..", "."])
def test_fetch_refuses_an_fname_that_leaves_its_folder(url, origin, tmp_path, fname):
    """fetch(fname="../x") wrote ~/.keras/x, beside the folder it was given (and returned
    '.../datasets/../x'); pooch's fname is a file name, and get_file refuses paths too."""
    folder = tmp_path / "data"
    with pytest.raises(prefetch.UsageError, match="fname"):
        prefetch.fetch(url, path=str(folder), fname=fname)
    assert not origin.requests
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # nothing beside, nothing in it


def test_fetch_refuses_a_url_that_is_not_a_string(home):
    with pytest.raises(prefetch.UsageError, match="url"):
        prefetch.fetch(5)


@pytest.mark.parametrize("how", ["watch", "wait"])
def test_watch_and_wait_of_several_jobs_survive_a_finished_one_cleaned_meanwhile(origin, home, tmp_path, capsys,
                                                                                  how):
    """watch([done, running]) or wait() while another shell forgets finished jobs (``prefetch
    clean``'s job housekeeping): the done job's record goes; watch and wait went on reading it
    and died with JobNotFoundError while the other job still ran. They keep the record they
    last read."""
    import threading

    from prefetch.jobs.housekeeping import clean_jobs

    origin.put("quick.bin", b"q" * 1000)
    origin.put("slow.bin", b"s" * 400_000)
    quick = prefetch.ensure(origin.url_for("quick.bin"), background=True, output_dir=str(tmp_path))
    prefetch.wait(quick.id, timeout=60, progress=False)
    origin.total_rate = 200_000  # about 2 s
    slow = prefetch.ensure(origin.url_for("slow.bin"), background=True, output_dir=str(tmp_path))
    cleaned = []
    cleaner = threading.Timer(0.5, lambda: cleaned.extend(clean_jobs().removed))
    cleaner.start()
    try:
        if how == "watch":
            jobs = prefetch.watch([quick.id, slow.id], interval=0.2)
        else:
            jobs = prefetch.wait(timeout=60, progress=False).jobs  # every job on record
    finally:
        cleaner.join()
        prefetch.wait(slow.id, timeout=60, progress=False)
    assert cleaned == [quick.id]  # (the slow job was still running then)
    assert [j.id for j in jobs] == [quick.id, slow.id]
    assert [j.state for j in jobs] == ["done", "done"]
    assert (tmp_path / "slow.bin").stat().st_size == 400_000


class CallbackBug(Exception):
    pass


def _raising_on(kinds):
    def on_event(event) -> None:
        if event.kind.name in kinds:
            raise CallbackBug(f"my callback broke on {event.kind.name}")

    return on_event


@pytest.mark.parametrize("kinds", [("START", "PROGRESS", "FAILED", "DONE"), ("PROGRESS",)],
                         ids=["every-file-event", "progress-only"])
def test_an_on_event_callback_that_raises_is_the_error_the_caller_gets(origin, home, tmp_path, kinds):
    """A caller's on_event that raised on a file's events (and again on its FAILED event) made
    each file vanish from the run: ensure() returned [] as a success and as_completed ended
    with no path and no error, nothing placed. A callback raising only on progress was
    reported as prefetch's own 'internal error'. Now the first exception of the callback
    stops the downloads (resumable) and is raised to the caller as it was raised."""
    import hashlib

    blobs = {f"s{i}.bin": bytes([i]) * 300_000 for i in range(3)}
    for name, data in blobs.items():
        origin.put(name, data)
    entries = [{"url": origin.url_for(n), "sha256": hashlib.sha256(d).hexdigest()} for n, d in blobs.items()]
    origin.total_rate = 600_000  # a second or two: progress events come
    for call in ("ensure", "as_completed"):
        out = tmp_path / call
        options = dict(urls=entries, output_dir=str(out), on_event=_raising_on(kinds), progress=False, connections=1)
        with pytest.raises(CallbackBug, match="my callback broke"):
            if call == "ensure":
                prefetch.ensure([], **options)
            else:
                list(prefetch.as_completed([], **options))
        for name in blobs:  # nothing half-placed: complete and verified, or resumable
            final = out / name
            assert not final.exists() or final.read_bytes() == blobs[name]
    origin.total_rate = None
    again = prefetch.ensure([], urls=entries, output_dir=str(tmp_path / "ensure"), progress=False)
    assert [(tmp_path / "ensure" / n).read_bytes() == d for n, d in blobs.items()] == [True] * 3
    assert len(again) == 3


@pytest.mark.parametrize("make", [lambda: prefetch.torch_dataset(5), lambda: prefetch.tf_generator(5),
                                  lambda: prefetch.torch_dataset(b"https://x/a.tar"),
                                  lambda: prefetch.tf_generator([b"https://x/a.tar"])],
                         ids=["torch-int", "tf-int", "torch-bytes", "tf-bytes"])
def test_the_adapters_refuse_bad_names_when_made_not_in_the_first_epoch(home, make):
    """torch_dataset(5) and tf_generator(5) died with TypeError ('int' object is not
    iterable); bytes names were taken and failed only when a DataLoader first iterated."""
    with pytest.raises(prefetch.UsageError, match="names"):
        make()


@pytest.mark.parametrize("age", [-5, float("nan"), float("inf"), "-1d"], ids=["negative", "nan", "inf", "neg-str"])
def test_clean_refuses_an_age_that_is_no_age(home, age):
    """clean(older_than=nan) removed nothing and said nothing (no age compares to NaN),
    -5 was taken as an age; each is refused as the command line refuses 'x'."""
    with pytest.raises(prefetch.UsageError, match="older-than|older_than"):
        prefetch.clean(older_than=age, dry_run=True)


@pytest.mark.parametrize("call", [
    lambda u: prefetch.cache_usage(cache_dir=5),
    lambda u: prefetch.remove(["mnist"], cache_dir=5, dry_run=True),
    lambda u: prefetch.remove(["mnist"], registry=5, dry_run=True),
    lambda u: prefetch.remove(["mnist"], root=5, dry_run=True),
    lambda u: prefetch.clean(root=5, dry_run=True),
    lambda u: prefetch.clean(cache_dir=5, dry_run=True),
    lambda u: prefetch.fetch(u, connections="x"),
    lambda u: prefetch.fetch(u, headers=5),
    lambda u: prefetch.fetch(u, path=5),
    lambda u: prefetch.fetch(u, limit_rate=[1]),
    lambda u: prefetch.get_file("a.bin", u, connections="x"),
], ids=["usage-cache_dir", "remove-cache_dir", "remove-registry", "remove-root", "clean-root", "clean-cache_dir",
        "fetch-connections", "fetch-headers", "fetch-path", "fetch-limit_rate", "get_file-connections"])
def test_housekeeping_and_dropins_refuse_a_wrong_type_with_one_usage_error(url, origin, tmp_path, monkeypatch, call):
    """Each died with a TypeError from deep inside (fs/paths.py, planning.py, pathlib)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(prefetch.UsageError) as caught:
        call(url)
    assert len(str(caught.value).splitlines()) == 1
    assert not origin.requests
