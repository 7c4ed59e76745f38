"""A URL's password never comes back in a message about the URL's hash, its file name or another
URL saved to the same place (real CLI, origin on 127.0.0.1).

The error line's scrub hides ``scheme://user:password@`` only up to a quote or a ``/`` in the
password; 4125c4f showed the URL redacted in the "cannot tell a file name" messages, but the
others still quoted it as typed:

- ``URL#sha256=zz`` (a malformed hash) or ``URL#sha256=A`` beside ``--sha256 B``: the hash is read
  before the URL is checked, and its message named the URL whole, so a password with a ``/``
  (which ``check_url`` refuses in its own words, hidden) or a quote was printed;
- two URLs saved as one file, one saved as the folder of another, one URL listed twice with two
  sha256s, a ``--torch-hub`` URL without a file name: each message named the URLs as typed.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_bad_input import one_error_line
from tests.test_proxies import env_with

QUOTED = "Sek'r1tPw"  # (a quote: the scrub stops there)
SLASHED = "Tr0ub4dor/3xQ"  # (a slash: every parser ends the host there)
SHA_A, SHA_B = "a" * 64, "b" * 64


@pytest.fixture
def host():
    with OriginServer() as server:
        server.put("f.bin", b"f" * 1000)
        yield server.url_for("f.bin").partition("://")[2].partition("/")[0]


def _no_password(got, password: str) -> str:
    line = one_error_line(got, 2)
    first, _, rest = password.partition("/" if "/" in password else "'")
    assert first not in got.stderr and rest not in got.stderr, got.stderr
    return line


@pytest.mark.parametrize("password", [QUOTED, SLASHED])
def test_a_bad_hash_in_the_urls_fragment_does_not_print_its_password(home, tmp_path, host, password):
    got = run_cli("get", f"http://alice:{password}@{host}/f.bin#sha256=zz", "-P", str(tmp_path), env=env_with())
    assert "not hexadecimal" in _no_password(got, password)


@pytest.mark.parametrize("password", [QUOTED, SLASHED])
def test_a_fragment_hash_beside_another_sha256_does_not_print_its_password(home, tmp_path, host, password):
    got = run_cli("get", f"http://alice:{password}@{host}/f.bin#sha256={SHA_A}", "--sha256", SHA_B,
                  "-P", str(tmp_path), env=env_with())
    assert "option differ" in _no_password(got, password)


def test_two_urls_saved_as_one_file_are_named_without_their_password(home, tmp_path, host):
    got = run_cli("get", f"http://alice:{QUOTED}@{host}/a/f.bin", f"http://alice:{QUOTED}@{host}/b/f.bin",
                  "-P", str(tmp_path), env=env_with())
    assert "would both be saved as" in _no_password(got, QUOTED)


def test_one_url_listed_twice_with_two_sha256s_is_named_without_its_password(home, tmp_path, host):
    url = f"http://alice:{QUOTED}@{host}/f.bin"
    got = run_cli("get", f"{url}#sha256={SHA_A}", f"{url}#sha256={SHA_B}", "-P", str(tmp_path), env=env_with())
    assert "listed twice with different sha256" in _no_password(got, QUOTED)


def test_a_url_saved_as_anothers_folder_is_named_without_its_password(home, tmp_path, host):
    listing = tmp_path / "list.txt"
    listing.write_text(f"http://alice:{QUOTED}@{host}/f.bin\n  out=x\nhttp://alice:{QUOTED}@{host}/g.bin\n  out=x/y\n")
    got = run_cli("get", "-i", str(listing), "-P", str(tmp_path / "out"), env=env_with())
    assert "the folder" in _no_password(got, QUOTED)


def test_a_torch_hub_url_without_a_file_name_is_named_without_its_password(home, tmp_path, host):
    got = run_cli("get", f"http://alice:{QUOTED}@{host}/", "--torch-hub", env=env_with())
    assert "cannot tell a checkpoint file name" in _no_password(got, QUOTED)


def test_a_torch_hub_jobs_record_and_status_json_keep_no_password(home, tmp_path, host):
    """Each file of a ``--torch-hub`` job named its URL, password and all, as its dataset: in the
    record (where a URL's password never is) and in ``status --json``'s ``files``."""
    from tests.test_proxies import everything_written

    env = dict(env_with(), TORCH_HOME=str(tmp_path / "torch"))
    started = run_cli("get", f"http://alice:HubSecret9@{host}/ckpt-abc.pth", "--torch-hub", "-b", env=env,
                      cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    run_cli("wait", "--timeout", "100", env=env, cwd=tmp_path, timeout=150)
    shown = run_cli("status", "--json", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert '"dataset": "http://alice:***@' in shown.stdout, shown.stdout
    assert "HubSecret9" not in shown.stdout and "HubSecret9" not in everything_written(home)
