"""Folders made for nltk_data (``FilePlan.private``: each level made 0755 whatever the umask,
safefs.make_dirs with a mode, new in the twelfth sitting): a link to nothing (a volume not
mounted) where a folder goes was passed over in silence (mkdir -p, the usual path, says EEXIST),
and the run failed later with a line that did not say why ('cannot write .../tokenizers: No
such file or directory'). Now the same line as every other download: the link and where it
points; exit 5. (A file in the way was already refused with its line, held here.)"""

from __future__ import annotations

from tests.nltk_origin import write_gh_pages


def _one_line_5(proc) -> str:
    assert proc.returncode == 5, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    return errors[0]


def test_nltk_data_under_a_link_to_a_volume_not_mounted(nginx_origin, home, cli, tmp_path, monkeypatch):
    write_gh_pages(nginx_origin.root)
    (tmp_path / "data").symlink_to(tmp_path / "not-mounted" / "vol")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "data" / "nltk_data"))
    line = _one_line_5(cli("get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for("")))
    assert "symbolic link to" in line and "does not exist" in line, line
    assert not (tmp_path / "not-mounted").exists()  # (nothing made through the link)


def test_nltk_data_where_a_file_is(nginx_origin, home, cli, tmp_path, monkeypatch):
    write_gh_pages(nginx_origin.root)
    (tmp_path / "nltk_data").write_text("not a folder")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nltk_data"))
    line = _one_line_5(cli("get", "nltk:punkt_tab", "--mirror", nginx_origin.url_for("")))
    assert "is a file, not a folder" in line, line
    assert (tmp_path / "nltk_data").read_text() == "not a folder"
