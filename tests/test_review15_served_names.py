"""A hostile review of ``get --content-disposition`` (fourteenth sitting): the server chooses the
file's name, so it must not choose one of the user's files to overwrite, one of the same
command's partial files, or a name that shows as something else (a right-to-left override, an
invisible character, a line break in the output). Each keeps the URL's name with one note, and
the download never fails over it. A real nginx serves the headers."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer

FILES = {  # path under the server root -> its Content-Disposition ("" : none)
    "f/notes": 'attachment; filename="notes.txt"',
    "files/111": 'attachment; filename="data.csv"',  # (two links whose servers name their files alike)
    "files/222": 'attachment; filename="data.csv"',
    "f/train": 'attachment; filename="train.csv"',
    "big.bin": "",
    "f/partof": 'attachment; filename="big.bin.part"',
    "f/stateof": 'attachment; filename="big.bin.part.json"',
    "w.part": "",
    "f/whole": 'attachment; filename="w"',
    "f/rtl": "attachment; filename*=UTF-8''invoice%E2%80%AEtxt.exe",  # shows as invoiceexe.txt
    "f/zwsp": "attachment; filename*=UTF-8''re%E2%80%8Bport.pdf",  # an invisible character
    "f/lsep": "attachment; filename*=UTF-8''a%E2%80%A8b.txt",  # U+2028: a line break in every output line
    "f/blank": 'attachment; filename="   "',
    "f/lead": 'attachment; filename=" .bashrc"',  # lists as .bashrc
    "f/trail": 'attachment; filename="train.csv "',
    "f/cjk": "attachment; filename*=UTF-8''%E8%AE%AD%E7%BB%83%E3%80%80%E6%95%B0%E6%8D%AE.csv",  # (U+3000: kept)
}


def _location() -> str:
    lines = []
    for path, value in FILES.items():
        if value:
            quoted = value.replace("\\", "\\\\").replace("'", "\\'")
            lines.append(f"location = /{path} {{ add_header Content-Disposition '{quoted}'; }}")
    return "\n".join(lines)


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "www"
    data = {}
    for i, path in enumerate(FILES):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        data[path] = f"{path} {i}\n".encode() * (3000 + i)  # (each its own size)
        (root / path).write_bytes(data[path])
    with NginxServer(root, location=_location()) as nginx:
        yield nginx, data


def _notes(stderr: str) -> list[str]:
    """The --content-disposition notes that say why the URL's name was kept (not the 'saved as NAME' one)."""
    return [line for line in stderr.splitlines() if "--content-disposition:" in line and "saved as" not in line]


def test_a_served_name_never_replaces_a_file_the_user_already_has(served, home, tmp_path):
    nginx, data = served
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_bytes(b"my own notes, written by hand\n")  # (a notebook's folder: the user's files)
    got = run_cli("get", nginx.url_for("f/notes"), "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (out / "notes.txt").read_bytes() == b"my own notes, written by hand\n"  # untouched
    assert (out / "notes").read_bytes() == data["f/notes"]  # under the URL's name
    assert len(_notes(got.stderr)) == 1 and "notes.txt" in _notes(got.stderr)[0], got.stderr

    # A file prefetch itself downloaded under the served name is no user's file: the same command
    # again finds it complete (one name, nothing under the URL's).
    first = run_cli("get", nginx.url_for("f/train"), "--content-disposition", "-P", str(out), "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = run_cli("get", nginx.url_for("f/train"), "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (out / "train.csv").read_bytes() == data["f/train"]
    assert not (out / "train").exists(), sorted(p.name for p in out.iterdir())
    assert not _notes(again.stderr), again.stderr
    assert "Traceback" not in got.stderr + again.stderr


def test_a_served_name_that_is_another_files_partial_keeps_the_urls(served, home, tmp_path):
    """``big.bin`` and a link its server names ``big.bin.part`` (or ``.part.json``) in one command:
    the second would land where the first is downloaded to (the first then failed, 'replaced by
    another file', and the folder kept the second's bytes under the partial's name)."""
    nginx, data = served
    out = tmp_path / "out"
    got = run_cli("get", nginx.url_for("big.bin"), nginx.url_for("f/partof"), nginx.url_for("f/stateof"),
                  "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (out / "big.bin").read_bytes() == data["big.bin"]
    assert (out / "partof").read_bytes() == data["f/partof"]
    assert (out / "stateof").read_bytes() == data["f/stateof"]
    assert sorted(p.name for p in out.iterdir()) == ["big.bin", "partof", "stateof"]

    # the other way round: a link saved as w.part, and one whose server names it w
    other = tmp_path / "other"
    got = run_cli("get", nginx.url_for("w.part"), nginx.url_for("f/whole"), "--content-disposition", "-P", str(other),
                  cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (other / "w.part").read_bytes() == data["w.part"]
    assert (other / "whole").read_bytes() == data["f/whole"]
    assert "Traceback" not in got.stderr


def test_names_that_show_as_something_else_keep_the_urls(served, home, tmp_path):
    nginx, data = served
    out = tmp_path / "out"
    names = ["rtl", "zwsp", "lsep", "blank", "lead", "trail"]
    got = run_cli("get", *(nginx.url_for(f"f/{n}") for n in names), nginx.url_for("f/cjk"), "--content-disposition",
                  "-P", str(out), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    for name in names:
        assert (out / name).read_bytes() == data[f"f/{name}"], name
    assert (out / "训练\u3000数据.csv").read_bytes() == data["f/cjk"]  # (an ideographic space is a name's)
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "训练\u3000数据.csv"])
    assert len(_notes(got.stderr)) == len(names), got.stderr
    shown = got.stdout + got.stderr
    assert "\u202e" not in shown and "\u200b" not in shown and "\u2028" not in shown, ascii(shown)


def test_a_file_already_there_that_matches_the_hash_given_is_found_in_place(served, home, tmp_path):
    """The user's own copy under the served name (wget --content-disposition got it earlier) that
    matches the --sha256 given is the file asked for: found in place, nothing under the URL's name.
    One that does not match is left alone, and the download goes under the URL's name."""
    import hashlib

    nginx, data = served
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.csv").write_bytes(data["f/train"])
    inode = (out / "train.csv").stat().st_ino
    good = hashlib.sha256(data["f/train"]).hexdigest()
    got = run_cli("get", nginx.url_for("f/train"), "--sha256", good, "--content-disposition", "-P", str(out),
                  cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in out.iterdir()) == ["train.csv"], sorted(p.name for p in out.iterdir())
    assert (out / "train.csv").stat().st_ino == inode and not _notes(got.stderr), got.stderr

    (out / "notes.txt").write_bytes(b"mine\n")
    good = hashlib.sha256(data["f/notes"]).hexdigest()
    got = run_cli("get", nginx.url_for("f/notes"), "--sha256", good, "--content-disposition", "-P", str(out),
                  cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert (out / "notes.txt").read_bytes() == b"mine\n" and (out / "notes").read_bytes() == data["f/notes"]


def test_another_links_file_its_server_named_alike_is_not_taken_for_this_one(served, home, tmp_path):
    """Two links whose servers both name their file data.csv (Figshare's files/111 and files/222),
    fetched by two commands: the second found the first's data.csv with prefetch's completion
    record and reported it "cached": the first link's bytes for the second link. A file there of
    another size than this link's server gives is another link's: the URL's name, with the note;
    the same link again still finds its own file complete."""
    nginx, data = served
    out = tmp_path / "out"
    first = run_cli("get", nginx.url_for("files/111"), "--content-disposition", "-P", str(out), "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = run_cli("get", nginx.url_for("files/222"), "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert (out / "data.csv").read_bytes() == data["files/111"]
    assert (out / "222").read_bytes() == data["files/222"]
    assert "another link" in "".join(_notes(second.stderr)), second.stderr
    again = run_cli("get", nginx.url_for("files/111"), "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert again.returncode == 0 and not _notes(again.stderr), again.stderr
    assert sorted(p.name for p in out.iterdir()) == ["222", "data.csv"]
