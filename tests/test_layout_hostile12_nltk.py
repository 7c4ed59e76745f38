"""NLTK 3.10 reading what prefetch placed, in the cases its hardened reader refuses.

nltk 3.10's ``pathsec`` refuses to open a data file that has a second name (``st_nlink > 1``:
"a hardlink can point at an outside-root inode"), and one that another account owns or can
write. ``prefetch export DIR nltk:ID`` hard-linked the data dir's own zip into DIR, so after an
export nltk's downloader raised ``PermissionError`` on that package (``nltk.download`` judges
every package by opening its zip) and a resource read from the zip was refused.
"""

from __future__ import annotations

import os

from tests.nltk_origin import STOPWORDS, write_gh_pages
from tests.test_nltk import _status_code, run_offline


def test_an_export_leaves_the_data_dirs_zip_one_name_nltk_opens(cli, home, nginx_origin, tmp_path):
    facts = write_gh_pages(nginx_origin.root)
    data = home / "nltk_data"
    env = {**os.environ, "NLTK_DATA": str(data)}
    got = cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env=env)
    assert got.returncode == 0, got.stderr
    exported = cli("export", str(tmp_path / "team-nltk"), "nltk:stopwords", env=env)
    assert exported.returncode == 0, exported.stderr
    archive = data / "corpora" / "stopwords.zip"
    assert (tmp_path / "team-nltk" / "packages" / "corpora" / "stopwords.zip").read_bytes() == archive.read_bytes()
    code = _status_code("stopwords", facts) + (
        "out['from_zip'] = nltk.data.find('corpora/stopwords.zip/stopwords/english').open().read().decode()\n")
    out = run_offline(code, "corpora/stopwords", env)
    assert out["stopwords"] == "installed"  # nltk.download("stopwords") says: up to date
    assert out["from_zip"].split() == STOPWORDS
    assert archive.stat().st_nlink == 1


def test_a_link_an_earlier_export_made_is_replaced_by_a_copy(cli, home, nginx_origin, tmp_path):
    write_gh_pages(nginx_origin.root)
    data = home / "nltk_data"
    env = {**os.environ, "NLTK_DATA": str(data)}
    assert cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env=env).returncode == 0
    assert cli("export", str(tmp_path / "team-nltk"), "nltk:stopwords", env=env).returncode == 0
    archive = data / "corpora" / "stopwords.zip"
    exported = tmp_path / "team-nltk" / "packages" / "corpora" / "stopwords.zip"
    exported.unlink()
    os.link(archive, exported)  # what an export before this fix left
    again = cli("export", str(tmp_path / "team-nltk"), "nltk:stopwords", env=env)
    assert again.returncode == 0, again.stderr
    assert archive.stat().st_nlink == 1 and exported.read_bytes() == archive.read_bytes()


def test_under_a_group_umask_nltk_reads_what_prefetch_placed(cli, home, nginx_origin):
    """A lab's ``umask 002`` (group-shared homes): nltk's own downloader installs without group
    write bits whatever the umask, and refuses to read a data dir, folder or file that has one."""
    facts = write_gh_pages(nginx_origin.root)
    data = home / "lab" / "nltk_data"  # two levels prefetch creates
    env = {**os.environ, "NLTK_DATA": str(data)}
    old = os.umask(0o002)
    try:
        got = cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env=env)
    finally:
        os.umask(old)
    assert got.returncode == 0, got.stderr
    modes = {str(p.relative_to(data)): oct(p.stat().st_mode & 0o777) for p in [data, *data.rglob("*")]}
    code = "from nltk.corpus import stopwords\nout['words'] = stopwords.words('english')\n" + _status_code(
        "stopwords", facts)
    out = run_offline(code, "corpora/stopwords", env)
    assert out["words"] == STOPWORDS, modes
    assert out["stopwords"] == "installed", modes


def test_a_tree_another_account_could_write_is_unzipped_again(cli, home, nginx_origin):
    """What an earlier prefetch left under ``umask 002`` (a group-writable unzipped folder): the zip
    is in place, so the tree was taken as done and nltk went on refusing it; nltk.download calls
    such a package stale and installs it again, and so does prefetch now."""
    facts = write_gh_pages(nginx_origin.root)
    data = home / "nltk_data"
    env = {**os.environ, "NLTK_DATA": str(data)}
    assert cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env=env).returncode == 0
    folder = data / "corpora" / "stopwords"
    for path in (folder, folder / "english"):
        path.chmod(path.stat().st_mode | 0o020)
    again = cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env=env)
    assert again.returncode == 0, again.stderr
    assert nginx_origin.access_log.read_text().count("stopwords.zip") == 1  # the zip was not fetched again
    code = "from nltk.corpus import stopwords\nout['words'] = stopwords.words('english')\n" + _status_code(
        "stopwords", facts)
    out = run_offline(code, "corpora/stopwords", env)
    assert out["words"] == STOPWORDS and out["stopwords"] == "installed"


def test_a_data_dir_another_account_could_write_is_refused_as_nltk_download_refuses(cli, home, nginx_origin):
    """nltk skips such a data dir whole ("NLTK will not read data from ..."), and its downloader
    refuses to install there; prefetch installed into it, said 0, and nltk then found nothing."""
    write_gh_pages(nginx_origin.root)
    data = home / "nltk_data"
    (data / "corpora").mkdir(parents=True)
    (data / "corpora").chmod(0o775)
    env = {**os.environ, "NLTK_DATA": str(data)}
    refused = cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env=env)
    assert refused.returncode == 5, refused.stderr
    assert refused.stderr.count("\n") == 1 and "chmod go-w" in refused.stderr and "corpora" in refused.stderr
    assert "stopwords.zip" not in nginx_origin.access_log.read_text()
    (data / "corpora").chmod(0o755)
    assert cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env=env).returncode == 0
    out = run_offline("from nltk.corpus import stopwords\nout['words'] = stopwords.words('english')\n",
                      "corpora/stopwords", env)
    assert out["words"] == STOPWORDS
