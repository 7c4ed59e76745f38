"""hf:// (and ms://) listings that no folder can hold, refused before a byte is fetched.

A git tree cannot list ``a`` both as a file and as the folder of ``a/b``; a hostile or
broken endpoint can. Before: every blob was downloaded, then linking failed half-way
(``File exists``; for ms:// a message about ``-o``).
"""

from __future__ import annotations

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
