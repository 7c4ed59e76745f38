"""``prefetch get nltk:ID``: real nltk reads what prefetch placed, served by a real nginx mirror."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from prefetch.cache import nltk_data
from prefetch.flow.planning import plan_request
from prefetch.flow.request import GetRequest
from tests.nltk_origin import STOPWORDS, write_gh_pages

# Runs in a fresh interpreter with every socket refused: nltk must find the data on disk.
OFFLINE = """
import socket
def _refuse(*a, **k):
    raise OSError("network used in an offline check")
socket.socket.connect = _refuse
socket.create_connection = _refuse
import json, sys, nltk
from nltk.downloader import Downloader, Package
out = {"found": str(nltk.data.find(sys.argv[1]))}
"""


def run_offline(code: str, resource: str, env: dict) -> dict:
    script = OFFLINE + code + "\nprint(json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", script, resource], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _status_code(ident: str, facts: dict) -> str:
    """nltk's own installed-or-stale judgement of the package, from the same index entry."""
    f = facts[ident]
    return textwrap.dedent(f"""
        d = Downloader(download_dir=nltk.data.path[0])
        info = Package(id={ident!r}, url="https://example.invalid/{ident}.zip", subdir={f['subdir']!r},
                       size={f['size']}, unzipped_size={f['unzipped_size']}, checksum={f['md5']!r}, unzip="1")
        path = nltk.data.path[0] + "/" + {f['subdir']!r} + "/{ident}.zip"
        out["{ident}"] = d._pkg_status(info, path)
    """)


def test_punkt_tab_from_a_mirror_then_nltk_tokenizes_offline(cli, home, nginx_origin):
    facts = write_gh_pages(nginx_origin.root)
    data = home / "nltk_data_dir"
    env = {**os.environ, "NLTK_DATA": str(data)}
    proc = cli("get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for(""), env=env)
    assert proc.returncode == 0, proc.stderr
    archive = data / "tokenizers" / "punkt_tab.zip"
    assert archive.read_bytes() == facts["punkt_tab"]["data"]
    assert (data / "tokenizers" / "punkt_tab" / "english" / "abbrev_types.txt").is_file()
    code = textwrap.dedent("""
        from nltk.tokenize import sent_tokenize
        out["sentences"] = sent_tokenize("Dr. Smith came home. He sat down.")
    """) + _status_code("punkt_tab", facts)
    out = run_offline(code, "tokenizers/punkt_tab/english/", env)
    assert out["found"] == str(data / "tokenizers" / "punkt_tab" / "english")
    assert out["sentences"] == ["Dr. Smith came home.", "He sat down."]
    assert out["punkt_tab"] == "installed"  # nltk.download would not fetch it again
    # Fetched from the mirror by its place in the layout, not by the index's url attribute.
    assert "/packages/tokenizers/punkt_tab.zip" in nginx_origin.access_log.read_text()

    again = cli("get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for(""), env=env)
    assert again.returncode == 0, again.stderr
    assert nginx_origin.access_log.read_text().count("punkt_tab.zip") == 1  # cached: no second download


def test_a_collection_gets_every_member(cli, home, nginx_origin):
    facts = write_gh_pages(nginx_origin.root, collections={"tiny": ["stopwords", "inner"],
                                                           "inner": ["punkt_tab"]})
    data = home / "nd"
    env = {**os.environ, "NLTK_DATA": str(data)}
    proc = cli("get", "nltk:tiny", "--mirror", nginx_origin.url_for(""), env=env)
    assert proc.returncode == 0, proc.stderr
    code = textwrap.dedent("""
        from nltk.corpus import stopwords
        out["words"] = stopwords.words("english")
    """) + _status_code("stopwords", facts) + _status_code("punkt_tab", facts)
    out = run_offline(code, "corpora/stopwords", env)
    assert out["words"] == STOPWORDS
    assert out["stopwords"] == out["punkt_tab"] == "installed"


def test_a_wrong_md5_exits_4_and_places_nothing(cli, home, nginx_origin):
    write_gh_pages(nginx_origin.root, wrong_md5="stopwords")
    data = home / "nd"
    proc = cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), env={**os.environ, "NLTK_DATA": str(data)})
    assert proc.returncode == 4, proc.stderr
    assert "md5" in proc.stderr
    corpora = data / "corpora"
    assert not (corpora / "stopwords.zip").exists() and not (corpora / "stopwords").exists()


def test_an_unknown_id_is_a_usage_error_and_a_mirrors_toml_entry_names_the_mirror(cli, home, nginx_origin):
    write_gh_pages(nginx_origin.root)
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(f'[datasets.lab-nltk]\nurl = "{nginx_origin.url_for("")}"\n')
    env = {**os.environ, "NLTK_DATA": str(home / "nd")}
    proc = cli("get", "nltk:no_such_package", "--mirror", "lab-nltk", env=env)
    assert proc.returncode == 2 and "not in the NLTK index" in proc.stderr, proc.stderr
    proc = cli("get", "nltk:stopwords", "--mirror", "lab-nltk", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (home / "nd" / "corpora" / "stopwords" / "english").is_file()


def test_the_built_in_snapshot_plans_without_the_network(home, monkeypatch):
    monkeypatch.setenv("NLTK_DATA", str(home / "nd"))
    plans, _ = plan_request(GetRequest(names=["nltk:stopwords", "nltk:punkt"]))
    stop = plans[0]
    # Facts of nltk_data's real index.xml (gh-pages 5db857e, 2023-02-02); this md5 and size
    # were also checked against the stopwords.zip in that commit.
    assert stop.spec.expected.hexdigest == "8726a900bca7083674536e2593686361" and stop.spec.size == 34276
    assert stop.spec.url == "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/stopwords.zip"
    assert stop.final == home / "nd" / "corpora" / "stopwords.zip"
    assert stop.extract_into == (home / "nd" / "corpora",)
    assert plans[1].final == home / "nd" / "tokenizers" / "punkt.zip"
    popular = nltk_data.load_snapshot().expand(["popular"])
    assert {"punkt", "stopwords", "wordnet"} <= {p.id for p in popular}


def test_the_data_dir_follows_nltk(home, tmp_path):
    env = {"HOME": str(home)}
    assert nltk_data.nltk_data_dir(env) == home / "nltk_data"  # nothing exists yet: ~/nltk_data
    assert nltk_data.nltk_data_dir({**env, "NLTK_DATA": f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"}) == tmp_path / "a"
    code = "import nltk, json; print(json.dumps(nltk.data.path))"
    real = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     env={**os.environ, "NLTK_DATA": str(tmp_path / "a")}).stdout)
    assert [str(p) for p in nltk_data.nltk_search_path({**os.environ, "NLTK_DATA": str(tmp_path / "a")})] == real


def test_a_background_job_installs_into_the_data_dir_of_the_launching_shell(cli, home, nginx_origin, monkeypatch):
    write_gh_pages(nginx_origin.root)
    data = home / "job_nltk"
    monkeypatch.setenv("NLTK_DATA", str(data))
    started = cli("get", "nltk:stopwords", "--mirror", nginx_origin.url_for(""), "-b", "--json")
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    waited = cli("wait", job, "--timeout", "120")
    assert waited.returncode == 0, waited.stderr + cli("log", job).stdout
    assert (data / "corpora" / "stopwords" / "english").read_text().split() == STOPWORDS


def test_an_id_the_snapshot_lacks_goes_to_the_origin_index_and_says_mirror_when_blocked(home, monkeypatch):
    import socket

    import pytest

    from prefetch.errors import NetworkError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(nltk_data, "ORIGIN", closed)  # raw.githubusercontent.com, unreachable
    monkeypatch.setenv("NLTK_DATA", str(home / "nd"))
    assert "a_later_package" not in nltk_data.load_snapshot().packages
    with pytest.raises(NetworkError) as info:
        plan_request(GetRequest(names=["nltk:a_later_package"]))
    assert "lacks a_later_package" in str(info.value) and "--mirror" in str(info.value)


def test_a_flat_dataset_mirror_is_not_taken_for_nltk_packages(home, monkeypatch):
    from prefetch.flow.files import source_urls

    monkeypatch.setenv("NLTK_DATA", str(home / "nd"))
    env = {**os.environ, "PREFETCH_DATASET_MIRROR": "http://10.0.0.5/keras-datasets/"}
    plans, options = plan_request(GetRequest(names=["nltk:stopwords", "mnist"]), env=env)
    assert options.mirrors  # the datasets use it
    nltk_plan = next(p for p in plans if p.dataset == "nltk:stopwords")
    assert source_urls(nltk_plan.spec, options, explicit_url=nltk_plan.explicit_url) == [
        "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/stopwords.zip"]
