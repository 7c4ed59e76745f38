"""An API key or token in a link's query is no more written to the resume record than a
password or a signature (real nginx on 127.0.0.1, a real interrupted ``prefetch get``).

``<final>.part.json`` sits beside the data (mode 0644, a folder others may read). The last
sitting kept passwords and signatures out of it (``net/urls.bare_link``), but a Google APIs
link's ``key=AIza...``, a Civitai-style ``api_key=``/``apikey=``, GitLab's ``private_token=``
were written there as given, in the URL list and again as the key of its validators. Now
they are credentials (``net/urls._CREDENTIAL_PARAMS``): left out of the stored link and of the
link's key, so the same link given again (the same key, or a new one) still resumes, while a
parameter that chooses the file (``alt=media``, ``v=2``) is kept and keeps two files apart.
"""

from __future__ import annotations

import pytest

from prefetch.net.urls import bare_link, link_key, redact_url
from tests.test_review17_resigned_resume import _interrupted_run, slow_bucket
from tests.test_review17_resume_secrets import get_resumes

SECRET = "AIzaSyD3cr3tK3yV4lu3"


@pytest.fixture
def nginx(tmp_path):
    with slow_bucket(tmp_path) as server:
        yield server


@pytest.mark.parametrize("param", ["key", "api_key", "apikey", "private_token"])
def test_an_api_key_in_the_query_is_not_kept_beside_the_file_and_the_link_still_resumes(nginx, home, tmp_path,
                                                                                        param):
    out = tmp_path / "data" / "big.bin"
    url = nginx.url_for("bucket/big.bin") + f"?alt=media&{param}={SECRET}"
    _interrupted_run(url, out)
    record = (tmp_path / "data" / "big.bin.part.json").read_text()
    assert SECRET not in record, record
    assert "alt=media" in record, record  # (the link it resumes from: what names the file is kept)

    again = url.replace(SECRET, SECRET[::-1])  # the same file asked with another (a rotated) key
    got = get_resumes(nginx, again, out, tmp_path)
    assert SECRET[::-1] not in got.stderr, got.stderr


def test_a_parameter_that_chooses_the_file_still_keeps_two_links_apart():
    base = "https://www.googleapis.com/drive/v3/files/ID"
    assert link_key(f"{base}?alt=media&key=A") == link_key(f"{base}?key=B&alt=media") == link_key(f"{base}?alt=media")
    assert link_key(f"{base}?alt=media&key=A") != link_key(f"{base}?alt=json&key=A")
    assert link_key(f"{base}?v=1&api_key=A") != link_key(f"{base}?v=2&api_key=A")
    assert bare_link(f"{base}?alt=media&Key=A&apikey=B&access_token=C") == f"{base}?alt=media"
    assert "SECRET" not in redact_url(f"{base}?alt=media&key=SECRET")
