"""Where the NLTK index comes from: the team store (real SeaweedFS), an exported folder, the snapshot.

Each test ends with the real nltk reading what prefetch placed, in a fresh interpreter
whose sockets refuse to connect (``tests/test_nltk.py``'s ``run_offline``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import textwrap
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from prefetch.cache import nltk_data
from prefetch.flow.planning import plan_request
from prefetch.flow.request import GetRequest
from tests.nltk_origin import STOPWORDS, _zip, write_gh_pages
from tests.test_nltk import _status_code, run_offline
from tests.test_store import machine_env, objects

TOKENIZE = textwrap.dedent("""
    out["words"] = nltk.word_tokenize("Dr. Smith came home. He sat down.")
""")
WORDS = ["Dr.", "Smith", "came", "home", ".", "He", "sat", "down", "."]


def sync_to_store(s3, folder: Path, prefix: str) -> None:
    """Every file under ``folder`` to ``prefix`` as plain objects (what ``aws s3 sync`` does: no metadata)."""
    bucket, _, key_prefix = prefix[len("s3://"):].partition("/")
    client = s3.client()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=key_prefix + path.relative_to(folder).as_posix(),
                              Body=path.read_bytes())


def nltk_env(base: dict | None, data: Path) -> dict:
    return {**(base if base is not None else os.environ), "NLTK_DATA": str(data)}


def test_punkt_tab_from_the_team_store_then_word_tokenize_works_offline(cli, home, s3, tmp_path):
    facts = write_gh_pages(tmp_path / "gh-pages")
    sync_to_store(s3, tmp_path / "gh-pages", s3.prefix)
    data = home / "nd"
    env = nltk_env(None, data)

    proc = cli("get", "nltk:punkt_tab", "--mirror", s3.prefix, env=env)

    assert proc.returncode == 0, proc.stderr
    assert (data / "tokenizers" / "punkt_tab.zip").read_bytes() == facts["punkt_tab"]["data"]
    out = run_offline(TOKENIZE + _status_code("punkt_tab", facts), "tokenizers/punkt_tab/english/", env)
    assert out["found"] == str(data / "tokenizers" / "punkt_tab" / "english")
    assert out["words"] == WORDS
    assert out["punkt_tab"] == "installed"  # nltk.download would not fetch it again
    assert not (data / "corpora").exists()  # only what was asked for


def test_popular_from_the_store_is_the_store_s_own_collection(cli, home, s3, tmp_path):
    # The store's index decides what "popular" is (here: two packages), not the snapshot's.
    facts = write_gh_pages(tmp_path / "gh", collections={"popular": ["stopwords", "tok"], "tok": ["punkt_tab"]})
    sync_to_store(s3, tmp_path / "gh", s3.prefix)
    data = home / "nd"
    env = nltk_env(None, data)

    proc = cli("get", "nltk:popular", "--mirror", s3.prefix, env=env)

    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in data.iterdir()) == ["corpora", "tokenizers"]
    code = TOKENIZE + 'from nltk.corpus import stopwords\nout["stop"] = stopwords.words("english")\n'
    out = run_offline(code + _status_code("stopwords", facts) + _status_code("punkt_tab", facts),
                      "corpora/stopwords", env)
    assert out["stop"] == STOPWORDS and out["words"] == WORDS
    assert out["stopwords"] == out["punkt_tab"] == "installed"


def test_a_wrong_md5_in_the_store_s_index_exits_4_and_places_nothing(cli, home, s3, tmp_path):
    write_gh_pages(tmp_path / "gh", wrong_md5="punkt_tab")
    sync_to_store(s3, tmp_path / "gh", s3.prefix)
    data = home / "nd"

    proc = cli("get", "nltk:punkt_tab", "--mirror", s3.prefix, env=nltk_env(None, data))

    assert proc.returncode == 4, proc.stderr
    assert "md5" in proc.stderr
    tokenizers = data / "tokenizers"
    assert not tokenizers.exists() or sorted(p.name for p in tokenizers.iterdir()) == []


def test_a_mirrors_toml_name_for_a_store_without_an_index_is_named_with_the_push_that_fills_it(cli, home, s3):
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(f'[datasets.team-nltk]\nurl = "{s3.prefix}"\n')
    proc = cli("get", "nltk:punkt_tab", "--mirror", "team-nltk", env=nltk_env(None, home / "nd"))
    assert proc.returncode == 3, proc.stderr
    assert f"no NLTK index at {s3.prefix}index.xml" in proc.stderr and "prefetch push nltk:" in proc.stderr


def team_package() -> tuple[bytes, list[str]]:
    """``team_terms``: the team's own word list, a package no public index has."""
    words = ["prefetch", "shard", "notebook"]
    return _zip({"team_terms/README": b"Our glossary.\n",
                 "team_terms/english": "\n".join(words).encode() + b"\n"}), words


def test_seed_is_refused_for_nltk_names_with_the_push_that_does_it(cli, home):
    proc = cli("get", "nltk:punkt_tab", "--seed", "s3://team/nltk", env=nltk_env(None, home / "nd"))
    assert proc.returncode == 2 and "prefetch push nltk:ID" in proc.stderr, proc.stderr
    assert not (home / "nd").exists()


def test_a_team_package_pushed_by_one_machine_is_got_by_another_from_the_store(cli, home, s3, tmp_path):
    # Machine A: punkt_tab from the public layout (a folder here), plus the team's own package,
    # made by hand in its data dir; it pushes both.
    public = tmp_path / "public"
    facts = write_gh_pages(public)
    a_data = home / "a_nltk"
    env_a = nltk_env(None, a_data)
    assert cli("get", "nltk:punkt_tab", "--mirror", str(public), env=env_a).returncode == 0
    team_zip, words = team_package()
    (a_data / "corpora").mkdir(parents=True)
    (a_data / "corpora" / "team_terms.zip").write_bytes(team_zip)
    with zipfile.ZipFile(io.BytesIO(team_zip)) as zf:
        zf.extractall(a_data / "corpora")

    pushed = cli("push", "nltk:punkt_tab", "nltk:team_terms", s3.prefix, env=env_a)

    assert pushed.returncode == 0, pushed.stderr
    stored = objects(s3, s3.prefix)
    assert stored["packages/tokenizers/punkt_tab.zip"][0] == facts["punkt_tab"]["data"]
    assert stored["packages/corpora/team_terms.zip"][0] == team_zip
    entries = {e.get("id"): e.attrib for e in ET.fromstring(stored["index.xml"][0]).iter("package")}
    assert entries["team_terms"]["checksum"] == hashlib.md5(team_zip).hexdigest()
    assert entries["team_terms"]["sha256_checksum"] == hashlib.sha256(team_zip).hexdigest()
    assert entries["team_terms"]["subdir"] == "corpora" and int(entries["team_terms"]["size"]) == len(team_zip)
    assert entries["punkt_tab"]["checksum"] == facts["punkt_tab"]["md5"]
    assert int(entries["punkt_tab"]["unzipped_size"]) == facts["punkt_tab"]["unzipped_size"]

    # Machine B: its own homes, nothing but the store.
    b_data = tmp_path / "b" / "nltk_data"
    env_b = nltk_env(machine_env(tmp_path / "b"), b_data)
    proc = cli("get", "nltk:team_terms", "nltk:punkt_tab", "--mirror", s3.prefix, env=env_b)
    assert proc.returncode == 0, proc.stderr
    code = TOKENIZE + textwrap.dedent("""
        from nltk.corpus.reader import WordListCorpusReader
        reader = WordListCorpusReader(nltk.data.find("corpora/team_terms"), ["english"])
        out["team"] = reader.words("english")
    """)
    team_facts = {"team_terms": {"subdir": "corpora", "size": len(team_zip), "md5": hashlib.md5(team_zip).hexdigest(),
                                 "unzipped_size": int(entries["team_terms"]["unzipped_size"])}}
    out = run_offline(code + _status_code("team_terms", team_facts), "corpora/team_terms", env_b)
    assert out["team"] == words and out["words"] == WORDS
    assert out["team_terms"] == "installed"


def test_export_to_a_folder_then_another_machine_gets_from_it_as_file_url(cli, home, tmp_path):
    public = tmp_path / "public"
    facts = write_gh_pages(public, collections={"basics": ["punkt_tab", "stopwords"]})
    a_data = home / "a_nltk"
    env_a = nltk_env(None, a_data)
    got = cli("get", "nltk:punkt_tab", "nltk:stopwords", "--mirror", public.as_uri(), env=env_a)
    assert got.returncode == 0, got.stderr
    nas = tmp_path / "nas" / "nltk"

    first = cli("export", str(nas), "nltk:punkt_tab", env=env_a)
    second = cli("export", str(nas), "nltk:stopwords", env=env_a)  # merged into the same index

    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    for ident in ("punkt_tab", "stopwords"):
        subdir = facts[ident]["subdir"]
        assert (nas / "packages" / subdir / f"{ident}.zip").read_bytes() == facts[ident]["data"]
    # The exported index.xml is one nltk's own downloader reads: its Package entries, as parsed by nltk.
    code = textwrap.dedent(f"""
        import xml.etree.ElementTree as ET
        root = ET.parse({str(nas / "index.xml")!r}).getroot()
        out["index"] = {{p.id: [p.subdir, p.size, p.checksum, p.unzipped_size]
                         for p in map(Package.fromxml, root.iter("package"))}}
    """)
    parsed = run_offline(code, "tokenizers/punkt_tab", env_a)["index"]
    assert parsed == {i: [f["subdir"], f["size"], f["md5"], f["unzipped_size"]] for i, f in facts.items()}

    b_data = tmp_path / "b" / "nltk_data"
    env_b = nltk_env(machine_env(tmp_path / "b"), b_data)
    proc = cli("get", "nltk:punkt_tab", "nltk:stopwords", "--mirror", nas.as_uri(), env=env_b)
    assert proc.returncode == 0, proc.stderr
    out = run_offline(TOKENIZE + _status_code("punkt_tab", facts) + _status_code("stopwords", facts),
                      "tokenizers/punkt_tab/english/", env_b)
    assert out["words"] == WORDS and out["punkt_tab"] == out["stopwords"] == "installed"


def test_a_folder_mirror_s_wrong_md5_exits_4_and_places_nothing(cli, home, tmp_path):
    folder = tmp_path / "mirror"
    write_gh_pages(folder, wrong_md5="stopwords")
    data = home / "nd"
    proc = cli("get", "nltk:stopwords", "--mirror", str(folder), env=nltk_env(None, data))
    assert proc.returncode == 4, proc.stderr
    assert not (data / "corpora" / "stopwords.zip").exists() and not (data / "corpora" / "stopwords").exists()


def test_export_refuses_a_zip_that_is_not_what_the_snapshot_says(cli, home, tmp_path):
    # stopwords.zip put there by hand (not placed by prefetch) with other bytes than the index's.
    data = home / "nd"
    (data / "corpora").mkdir(parents=True)
    (data / "corpora" / "stopwords.zip").write_bytes(_zip({"stopwords/english": b"x\n"}))
    proc = cli("export", str(tmp_path / "out"), "nltk:stopwords", env=nltk_env(None, data))
    assert proc.returncode == 4, proc.stderr
    assert "not published" in proc.stderr
    assert not (tmp_path / "out" / "packages").exists()


def test_the_snapshot_has_punkt_tab_pinned_to_the_commit_its_facts_come_from(home, monkeypatch):
    monkeypatch.setenv("NLTK_DATA", str(home / "nd"))
    plans, _ = plan_request(GetRequest(names=["nltk:punkt_tab", "nltk:averaged_perceptron_tagger_eng"]))
    punkt = plans[0]
    commit = "550b6625bcef1f2abff2ff770a5a0d272c9c6b2a"
    assert punkt.spec.url == f"https://raw.githubusercontent.com/nltk/nltk_data/{commit}/packages/tokenizers/punkt_tab.zip"
    assert (punkt.spec.expected.algorithm, punkt.spec.expected.hexdigest, punkt.spec.size) == (
        "sha256", "e57f64187974277726a3417ca6f181ec5403676c717672eef6a748a7b20e0106", 4319076)
    assert punkt.final == home / "nd" / "tokenizers" / "punkt_tab.zip"
    assert punkt.extract_into == (home / "nd" / "tokenizers",)
    assert plans[1].final == home / "nd" / "taggers" / "averaged_perceptron_tagger_eng.zip"
    snapshot = nltk_data.load_snapshot()
    assert "2023-02-02" in snapshot.source and commit[:12] in snapshot.source
    # The 2023 entries are unchanged: md5-checked, from gh-pages.
    assert snapshot.packages["stopwords"].expected == ("md5", "8726a900bca7083674536e2593686361")


def test_an_index_with_sha256_checksums_is_checked_by_sha256(tmp_path):
    # Indexes built since October 2025 carry sha256_checksum beside the md5; nltk 3.10 prefers it.
    zip_bytes = _zip({"x/a": b"a"})
    xml = (f'<nltk_data><packages><package id="x" subdir="corpora" size="{len(zip_bytes)}" unzipped_size="1" '
           f'checksum="{hashlib.md5(zip_bytes).hexdigest()}" '
           f'sha256_checksum="{hashlib.sha256(zip_bytes).hexdigest()}" unzip="1" url="u"/></packages>'
           '<collections/></nltk_data>').encode()
    pkg = nltk_data.parse_index(xml, source="test").packages["x"]
    assert pkg.expected == ("sha256", hashlib.sha256(zip_bytes).hexdigest())
    again = nltk_data.parse_index(nltk_data.render_index(nltk_data.parse_index(xml, source="t")), source="t")
    assert again.packages["x"] == pkg


def test_verify_and_rm_of_nltk_names(cli, home, tmp_path):
    folder = tmp_path / "mirror"
    write_gh_pages(folder)
    data = home / "nd"
    env = nltk_env(None, data)
    assert cli("get", "nltk:punkt_tab", "--mirror", str(folder), env=env).returncode == 0
    archive, unzipped = data / "tokenizers" / "punkt_tab.zip", data / "tokenizers" / "punkt_tab"

    # Checked against the hash it was placed with (the mirror's md5), not the snapshot's sha256
    # of the public punkt_tab (these are other bytes).
    ok = cli("verify", "nltk:punkt_tab", "--json", env=env)
    assert ok.returncode == 0, ok.stderr
    assert [(r["path"], r["state"], r["algorithm"]) for r in json.loads(ok.stdout)] == [(str(archive), "ok", "md5")]

    with archive.open("ab") as f:
        f.write(b"x")
    bad = cli("verify", "nltk:punkt_tab", env=env)
    assert bad.returncode == 4 and "mismatch" in bad.stdout, bad.stdout + bad.stderr

    dry = cli("rm", "nltk:punkt_tab", "--dry-run", env=env)
    assert dry.returncode == 0 and archive.exists() and unzipped.is_dir(), dry.stderr
    gone = cli("rm", "nltk:punkt_tab", "--json", env=env)
    assert gone.returncode == 0, gone.stderr
    assert {(r["path"], r["reason"]) for r in json.loads(gone.stdout)["removed"]} >= {
        (str(archive), "file"), (str(unzipped), "extracted")}
    assert sorted(p.name for p in (data / "tokenizers").iterdir()) == []
    missing = cli("verify", "nltk:punkt_tab", env=env)
    assert missing.returncode == 1 and "not on disk" in missing.stdout
    # Placed again from scratch: the completion record went with the file.
    assert cli("get", "nltk:punkt_tab", "--mirror", str(folder), env=env).returncode == 0
    assert cli("verify", "nltk:punkt_tab", env=env).returncode == 0


def test_a_background_job_reads_a_folder_mirror_named_relative_to_the_launching_shell(home, tmp_path):
    from tests.conftest import run_cli

    work = tmp_path / "work"
    facts = write_gh_pages(work / "mirror")
    data = home / "nd"
    env = nltk_env(None, data)
    started = run_cli("get", "nltk:punkt_tab", "--mirror", "./mirror", "-b", "--json", env=env, cwd=work)
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    waited = run_cli("wait", job, "--timeout", "120", env=env, cwd=home)  # the worker's cwd is not ./work
    assert waited.returncode == 0, waited.stderr + run_cli("log", job, env=env).stdout
    assert (data / "tokenizers" / "punkt_tab.zip").read_bytes() == facts["punkt_tab"]["data"]


def test_list_shows_nltk_packages_and_list_of_names_exits_1_until_complete(cli, home, tmp_path):
    folder = tmp_path / "mirror"
    write_gh_pages(folder)
    data = home / "nd"
    env = nltk_env(None, data)
    before = cli("list", "nltk:punkt_tab", "--json", env=env)
    assert before.returncode == 1, before.stderr
    assert [(r["name"], r["state"]) for r in json.loads(before.stdout)["nltk"]["packages"]] == [
        ("nltk:punkt_tab", "missing")]

    assert cli("get", "nltk:punkt_tab", "--mirror", str(folder), env=env).returncode == 0
    named = cli("list", "nltk:punkt_tab", "--json", env=env)
    assert named.returncode == 0, named.stderr
    (row,) = json.loads(named.stdout)["nltk"]["packages"]
    archive = data / "tokenizers" / "punkt_tab.zip"
    assert (row["state"], row["path"], row["bytes"]) == ("complete", str(archive), archive.stat().st_size)
    everything = cli("list", env=env)
    assert everything.returncode == 0, everything.stderr
    assert f"NLTK data: {data}" in everything.stdout and "nltk:punkt_tab" in everything.stdout

    import shutil

    shutil.rmtree(data / "tokenizers" / "punkt_tab")  # the unzipped folder nltk reads is gone
    gone = cli("list", "nltk:punkt_tab", "--json", env=env)
    assert gone.returncode == 1
    assert json.loads(gone.stdout)["nltk"]["packages"][0]["state"] == "zip only"
    bad = cli("list", "nltk:../x", env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
