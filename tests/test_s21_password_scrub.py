"""A password that is a common word (``data``, ``home``) is hidden where it stands as a credential,
and nowhere else (real CLI ``get`` and ``doctor``, a dead proxy port on 127.0.0.1).

The scrub replaced every piece of three characters or more of a proxy's (or a configured URL's)
password wherever it appeared in a printed line: with ``https_proxy=http://bob:data@...``,
``doctor`` showed the Keras cache as ``~/.keras/***sets`` and an error named
``http://.../***/x.bin``. That mangled the line and told an onlooker the password (the word that
turned into ``***``). Now a piece is hidden only as a credential: ``:PASSWORD@`` (as written,
percent-decoded, or as requests quotes it), a parser's quoted words (``'alice:Zq7'``), or with
the neighbours it has in the URL; the hostile spellings of tests/test_proxy_hostile_*.py still
never show.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.test_proxies import env_with


def _hide(text: str, value: str) -> str:
    from prefetch.net.proxies import hide_proxy_passwords

    return hide_proxy_passwords(text, {"https_proxy": value})


def test_a_common_word_password_leaves_paths_and_words_intact():
    value = "http://bob:data@127.0.0.1:3128"
    said = (f"HTTPSConnectionPool: Max retries exceeded with url: /data/x.bin (Caused by ProxyError({value}));"
            " metadata in /home/me/.keras/datasets; 'bob:data'")
    shown = _hide(said, value)
    assert shown == ("HTTPSConnectionPool: Max retries exceeded with url: /data/x.bin (Caused by ProxyError("
                     "http://***@127.0.0.1:3128)); metadata in /home/me/.keras/datasets; 'bob:***'"), shown


@pytest.mark.parametrize("value, said, hidden", [
    ("http://bob:da%40ta@127.0.0.1:3128", "auth bob:da@ta@127.0.0.1 for /da@ta/", "auth bob:***@127.0.0.1"),
    ("http://bob:da%40ta@127.0.0.1:3128", "as typed: bob:da%40ta@host", "as typed: bob:***@host"),
    ("http://bob:Zq7\\pw@127.0.0.1:3128", "sent http://bob:Zq7%5Cpw@127.0.0.1:3128/", "sent http://bob:***@127.0.0.1"),
    ("bob:ab@127.0.0.1:3128", "user bob:ab@127.0.0.1 and ab in a word", "user bob:***@127.0.0.1 and ab in a word"),
])
def test_the_password_as_written_decoded_or_requoted_is_hidden_whatever_its_length(value, said, hidden):
    shown = _hide(said, value)
    assert shown.startswith(hidden), shown


@pytest.mark.parametrize("value, said", [
    ("http://alice:Zq7\\pw@127.0.0.1:9", "Failed to parse: 'alice:Zq7' is not a valid host or port"),
    ("http://alice:Zq7pw/x@127.0.0.1:9", "Port could not be cast to integer value as 'Zq7pw'"),
    ("http://alice:ab/Zq7pw@127.0.0.1:9", "No host in http://alice:ab/Zq7pw@127.0.0.1:9/"),
    ("http://alice:ab/Zq7pw@127.0.0.1:9", "bad path /Zq7pw@127.0.0.1:9"),
    ("socks5://bob@example.com:Zq7pw#x@127.0.0.1:9", "'example.com:Zq7pw' is not a valid port"),
    ("http://alice:8123/Zq7pw@127.0.0.1:9", "HTTPConnectionPool(host='alice', port=8123): Max retries exceeded"),
])
def test_the_hostile_spellings_still_never_show_while_the_same_word_elsewhere_stays(value, said):
    shown = _hide(said + " ; /srv/Zq7pw/x.bin", value)
    assert shown.endswith(" ; /srv/Zq7pw/x.bin"), shown  # (the letters as a folder's name: not a credential)
    before = shown.rpartition(" ; ")[0]
    assert "Zq7" not in before and "8123" not in before and "***" in shown, shown


def test_doctor_and_get_keep_a_common_word_but_never_the_password(home, tmp_path):
    dead = "http://bob:data@127.0.0.1:9"
    pip_conf = home / ".config" / "pip" / "pip.conf"
    pip_conf.parent.mkdir(parents=True)
    pip_conf.write_text("[global]\nindex-url = https://alice:data@127.0.0.1:9/simple\n")
    env = env_with(https_proxy=dead, http_proxy=dead, no_proxy="example.invalid", PIP_CONFIG_FILE=str(pip_conf))

    doctor = run_cli("doctor", "--deadline", "1", env=env)
    shown = doctor.stdout + doctor.stderr
    assert "Traceback" not in shown and "proxy" in shown, shown
    assert ":data@" not in shown and "bob:data" not in shown, shown
    assert "alice:***@" in shown, shown
    assert "/.keras/datasets" in shown and "***sets" not in shown, shown  # the Keras cache named as it is

    got = run_cli("get", "http://127.0.0.1:9/data/x.bin", "-o", str(tmp_path / "data" / "x.bin"), env=env)
    assert got.returncode in (2, 3), got.stderr
    said = got.stdout + got.stderr
    assert ":data@" not in said and "/***/" not in said, said
    assert "/data/x.bin" in said or "x.bin" in said, said
