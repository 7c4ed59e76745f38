"""True/False and count arguments the API took as anything: ``progress="no"`` is a true
string (a bar was shown), ``background="no"`` started a detached job, ``on_event=`` with
``background=True`` was never called (the job's events are in another process), and
``host_connections=0`` or ``-1``, refused on the command line (``x>=1``), went through.
Each is now one ``UsageError`` naming the argument, before anything is asked of the server.
"""

from __future__ import annotations

import pytest

import prefetch


@pytest.fixture
def url(origin, home):
    origin.put("a.bin", b"x" * 1000)
    return origin.url_for("a.bin")


BAD = [
    ("progress", lambda u: prefetch.ensure(u, progress="no")),
    ("progress", lambda u: prefetch.ensure(u, progress=0)),
    ("background", lambda u: prefetch.ensure(u, background="no")),
    ("on_event", lambda u: prefetch.ensure(u, background=True, on_event=lambda event: None)),
    ("host_connections", lambda u: prefetch.ensure(u, host_connections=0, progress=False)),
    ("host_connections", lambda u: prefetch.ensure(u, host_connections=-1, progress=False)),
    ("connections", lambda u: prefetch.ensure(u, connections=-2, progress=False)),
    ("progress", lambda u: prefetch.wait(u, progress="no")),
    ("progress", lambda u: next(iter(prefetch.as_completed(u, progress="no")))),
    ("keep_going", lambda u: next(iter(prefetch.as_completed(u, keep_going="no", progress=False)))),
    ("host_connections", lambda u: next(iter(prefetch.as_completed(u, host_connections=0, progress=False)))),
    ("progress", lambda u: prefetch.get_file(origin=u, progress="no")),
    ("progress", lambda u: prefetch.fetch(u, progress="no")),
    ("dry_run", lambda u: prefetch.remove("a.bin", dry_run="no")),
    ("torch_hub", lambda u: prefetch.remove("a.bin", torch_hub="no")),
    ("dry_run", lambda u: prefetch.clean(dry_run="no")),
]


@pytest.mark.parametrize("argument, call", BAD, ids=[f"{a}-{i}" for i, (a, _) in enumerate(BAD)])
def test_a_switch_or_count_of_the_wrong_kind_is_one_usage_error_before_anything_runs(url, origin, tmp_path,
                                                                                     monkeypatch, capfd,
                                                                                     argument, call):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(prefetch.UsageError, match=argument) as caught:
        call(url)
    assert len(str(caught.value).splitlines()) == 1
    assert not origin.requests  # refused before anything was asked of the server
    assert not prefetch.status()  # no background job started
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # no bar shown


def test_the_switches_as_documented_still_work(url, tmp_path):
    assert prefetch.ensure(url, output_dir=str(tmp_path), progress=None, background=False, host_connections=1)
    assert [str(p).endswith("a.bin") for p in prefetch.as_completed(url, output_dir=str(tmp_path), keep_going=True,
                                                                progress=False)] == [True]


@pytest.mark.parametrize("guess, real", [("get", "ensure"), ("download", "ensure"), ("rm", "remove")])
def test_a_commands_name_tried_in_python_names_the_api_function(guess, real):
    """``prefetch.get("mnist")``, the command's name, was a bare AttributeError."""
    with pytest.raises(AttributeError, match=rf"prefetch\.{real}\(\)"):
        getattr(prefetch, guess)
    assert not hasattr(prefetch, guess)  # (still an AttributeError: hasattr, tab completion)
