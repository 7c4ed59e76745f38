"""Hugging Face cache placement against the real huggingface_hub, with hubs and caches that bite.

* Listings no folder can hold (hf:// and ms://), refused before a byte is fetched: a git tree
  cannot list ``a`` both as a file and as the folder of ``a/b``; a hostile or broken endpoint
  can. Before: every blob was downloaded, then linking failed half-way (``File exists``; for
  ms:// a message about ``-o``).
* huggingface_hub's ``.no_exist/<commit>/<path>`` (a 404 it recorded) hid a file prefetch then
  placed at that commit from ``try_to_load_from_cache``; removed now, never through a link.
"""

from __future__ import annotations

import os

import pytest

from tests.test_caches_hostile_ms import ms, ms_env  # noqa: F401
from tests.test_hf import cache, hf_env, hub  # noqa: F401

PRE = {"a": b"file a\n" * 100, "a/b": b"file a/b\n", "c": b"c\n"}


def test_hf_a_file_that_is_also_a_folder_is_refused_before_any_download(hf_env, hub, home, cli):
    hub.add_repo("acme/pre", PRE)
    proc = cli("get", "hf://acme/pre")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and "'a'" in proc.stderr and "'a/b'" in proc.stderr, proc.stderr
    assert not hub.file_requests(method=None)  # no resolve request: no byte fetched
    assert not (cache(home) / "models--acme--pre" / "snapshots").exists()


def test_ms_a_file_that_is_also_a_folder_is_refused_before_any_download(ms_env, ms, home, cli):
    ms.add_repo("acme/pre", PRE)
    proc = cli("get", "ms://acme/pre")
    assert proc.returncode == 3, proc.stderr
    assert "'a'" in proc.stderr and "'a/b'" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not ms.file_requests()
    assert not (home / "ms" / "models" / "acme--pre").exists()


def test_a_no_exist_marker_huggingface_hub_left_does_not_hide_a_placed_file(hf_env, hub, home, cli):
    """huggingface_hub records a 404 as ``.no_exist/<commit>/<path>``, and ``try_to_load_from_cache``
    (what transformers asks first, and offline) answers "does not exist" from it before looking at
    the snapshot. A mirror that had not synced a file yet 404s it at a commit that has it."""
    from tests.test_hf import hf_python

    repo = hub.add_repo("acme/nx", {"config.json": b'{"a": 1}\n', "tokenizer.json": b"{}\n"})
    late = repo.files.pop("config.json")  # the mirror does not have it yet (same commit)
    probe = hf_python("""
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import EntryNotFoundError
try:
    hf_hub_download("acme/nx", "config.json")
except EntryNotFoundError:
    print("404")
""", hf_env, offline=False)  # the real huggingface_hub, online against the local hub
    assert probe.stdout.strip() == "404", probe.stderr
    marker = cache(home) / "models--acme--nx" / ".no_exist" / repo.commit / "config.json"
    assert marker.is_file()
    repo.files["config.json"] = late  # synced now
    proc = cli("get", "hf://acme/nx")
    assert proc.returncode == 0, proc.stderr
    done = hf_python("""
from huggingface_hub import try_to_load_from_cache
found = try_to_load_from_cache("acme/nx", "config.json")
print(open(found).read() if isinstance(found, str) else repr(found))
""", hf_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"a": 1}\n\n', done.stdout
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant another user's link")
def test_a_no_exist_folder_planted_as_another_users_link_is_never_entered(hf_env, hub, home, cli, tmp_path):
    repo = hub.add_repo("acme/nx2", {"config.json": b'{"a": 2}\n'})
    victim = tmp_path / "victim"
    (victim / repo.commit).mkdir(parents=True)
    (victim / repo.commit / "config.json").write_bytes(b"")  # a file of the planter's victim
    folder = cache(home) / "models--acme--nx2"
    folder.mkdir(parents=True)
    link = folder / ".no_exist"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    proc = cli("get", "hf://acme/nx2")
    assert proc.returncode == 0, proc.stderr
    assert (victim / repo.commit / "config.json").exists()  # not removed through the link
