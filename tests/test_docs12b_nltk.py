"""docs/commands/nltk.md runs as typed: its mirrors are local, and the real nltk reads what it placed.

The page runs as a notebook (tests/docs_pages.py): each ``!prefetch`` line in page order,
through a ``prefetch`` on PATH, in one cwd and one HOME (so the data dir is ``~/nltk_data``,
as the page says), then its Python with the real nltk 3.10, every socket refused. What the page
leaves to the reader is filled in, and only that:

* its three mirrors hold a gh-pages copy (tests/nltk_origin.py: ``punkt_tab``, ``stopwords``
  and a ``popular`` collection of both): ``s3://team/nltk`` is a prefix of the SeaweedFS
  store, ``/mnt/nas/nltk`` a folder, ``http://10.0.0.5/nltk_data`` a local nginx;
* the team's own package of the push example, ``corpora/team_terms.zip``, is made by hand in
  the data dir, as the page says it is;
* after the page's ``-b`` line, ``prefetch wait`` before the cells that read its files.

``nltk.download("punkt_tab")`` asks nltk's index online, at raw.githubusercontent.com; here
nltk's downloader is given the mirror's ``index.xml`` instead (its ``urlopen``, not ours),
and must say the package is up to date. Not run: the first line, ``get nltk:punkt_tab``
without a mirror: it fetches the real package from GitHub, checked by its real sha256.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

from tests.docs_pages import ROOT, Notebook, isolated_env, localize, page_cells, prefetch_on_path
from tests.nginx import NginxServer, nginx_binary
from tests.nltk_origin import write_gh_pages
from tests.s3server import weed_binary

PAGE = ROOT / "docs" / "commands" / "nltk.md"
NOT_HERE = "prefetch get nltk:punkt_tab"  # (the line without a mirror: the internet)

PYTHON = """
import socket
def _refuse(*a, **k):
    raise OSError("network used where the page says none is")
socket.socket.connect = _refuse
socket.create_connection = _refuse
import nltk.downloader
_index = {index!r}
nltk.downloader.urlopen = lambda url, *a, **k: open(_index, "rb")  # nltk's index, from the mirror
"""


def upload_tree(s3_server, folder: Path, url: str) -> None:
    bucket, _, prefix = url[len("s3://"):].partition("/")
    client = s3_server.client()
    for path in folder.rglob("*"):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=prefix.rstrip("/") + "/" + path.relative_to(folder).as_posix(),
                              Body=path.read_bytes())


def team_terms_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("team_terms/", b"")
        zf.writestr("team_terms/english", b"prefetch\nnotebook\n")
    return buf.getvalue()


def test_nltk_page_runs_as_typed(s3_server, tmp_path):
    if nginx_binary() is None or weed_binary() is None:
        raise RuntimeError("nginx and seaweedfs are needed: bash tests/run.sh installs them")
    home = tmp_path / "home"
    home.mkdir()
    env = isolated_env(home, prefetch_on_path(tmp_path / "bin"))
    env.update(s3_server.env())
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(home / "no-aws-config")
    work = tmp_path / "notebook"
    work.mkdir()
    nb = Notebook(work, env)

    pages = tmp_path / "gh-pages"
    pages.mkdir()
    facts = write_gh_pages(pages, collections={"popular": ["punkt_tab", "stopwords"]})
    nas = tmp_path / "nas-nltk"
    shutil.copytree(pages, nas)
    store = f"s3://team/docs12b-{tmp_path.name[-12:]}/nltk"
    upload_tree(s3_server, pages, store)
    www = tmp_path / "www"
    www.mkdir()
    shutil.copytree(pages, www / "nltk_data")

    cells = page_cells(PAGE)
    shell = [c for k, c in cells if k == "shell"]
    assert len(shell) >= 12 and NOT_HERE in shell, shell
    data = home / "nltk_data"
    with NginxServer(www) as nginx:
        hosts = {"s3://team/nltk": store, "/mnt/nas/nltk": str(nas), "http://10.0.0.5/": nginx.url_for("")}
        failed, waited = [], False
        for kind, code in cells:
            if kind == "python":
                ran = nb.python(PYTHON.format(index=str(pages / "index.xml")) + code
                                + "\nprint(nltk.word_tokenize('Dr. Smith came home. He sat down.'))\n"
                                + "print(nltk.data.find('tokenizers/punkt_tab/english/'))\n")
                if ran.returncode != 0 or "punkt_tab is already up-to-date" not in ran.stdout + ran.stderr:
                    failed.append(str(ran))
                assert "['Dr.', 'Smith', 'came', 'home', '.', 'He', 'sat', 'down', '.']" in ran.stdout, str(ran)
                assert ran.stdout.split()[-1] == str(data / "tokenizers" / "punkt_tab" / "english"), str(ran)
                continue
            if code == NOT_HERE:
                continue
            if "push" in code and not waited:  # (the -b line's files, before they are pushed)
                waited = nb.shell("prefetch wait").returncode == 0
            if "team_terms" in code:
                (data / "corpora" / "team_terms.zip").write_bytes(team_terms_zip())
            ran = nb.shell(localize(code, hosts))
            if ran.returncode != 0:
                failed.append(str(ran))
        log = nginx.access_log.read_text()
    assert not failed, "nltk.md lines that fail as typed:\n" + "\n".join(failed)
    assert "/nltk_data/packages/tokenizers/punkt_tab.zip" not in log  # already in place from the store
    assert "/nltk_data/index.xml" in log

    # What the page says each line leaves.
    assert (data / "corpora" / "stopwords.zip").read_bytes() == facts["stopwords"]["data"]  # `popular`'s member
    assert not (data / "tokenizers" / "punkt_tab.zip").exists()  # the page's last line: `rm nltk:punkt_tab`
    assert (nas / "packages" / "tokenizers" / "punkt_tab.zip").read_bytes() == facts["punkt_tab"]["data"]
    bucket, _, prefix = store[len("s3://"):].partition("/")
    keys = {o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    assert f"{prefix}/packages/corpora/team_terms.zip" in keys
    index = s3_server.client().get_object(Bucket=bucket, Key=f"{prefix}/index.xml")["Body"].read().decode()
    assert 'id="team_terms"' in index and 'id="punkt_tab"' in index
