"""A copy of nltk_data's gh-pages layout, built in code: ``index.xml`` and ``packages/<subdir>/<id>.zip``.

The packages are real NLTK formats, written as nltk 3.10 reads them:

* ``punkt_tab`` (``tokenizers``): ``punkt_tab/english/`` with the four files
  ``nltk.tokenize.punkt.load_punkt_params`` reads (``collocations.tab``,
  ``sent_starters.txt``, ``abbrev_types.txt``, ``ortho_context.tab``); "dr" and "mr" are
  abbreviations, so ``sent_tokenize("Dr. Smith came. He sat.")`` gives two sentences;
* ``stopwords`` (``corpora``): ``stopwords/english``, one word a line, as
  ``nltk.corpus.stopwords.words("english")`` reads it.

``write_gh_pages(root, ...)`` writes the tree (nginx serves it) and returns the index facts.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

STOPWORDS = ["a", "an", "the", "and", "of"]


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted({n.rsplit("/", 1)[0] + "/" for n in files if "/" in n}):
            zf.writestr(zipfile.ZipInfo(name), b"")
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 8, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.create_system = 3
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def punkt_tab_zip() -> bytes:
    lang = "punkt_tab/english/"
    return _zip({
        "punkt_tab/README": b"Punkt sentence tokenizer models (a small test copy).\n",
        lang + "abbrev_types.txt": b"dr\nmr\nmrs\ne.g\n",
        lang + "collocations.tab": b"",
        lang + "sent_starters.txt": b"he\nshe\nthe\n",
        lang + "ortho_context.tab": b"the\t34\nhe\t2\n",
    })


def stopwords_zip() -> bytes:
    return _zip({"stopwords/README": b"Stopwords (a small test copy).\n",
                 "stopwords/english": "\n".join(STOPWORDS).encode() + b"\n"})


PACKAGES = {"punkt_tab": ("tokenizers", punkt_tab_zip), "stopwords": ("corpora", stopwords_zip)}


def write_gh_pages(root: Path, *, collections: dict[str, list[str]] | None = None,
                   wrong_md5: str | None = None) -> dict[str, dict]:
    """Write ``root/index.xml`` and ``root/packages/...``; the index names the origin in its urls.

    ``wrong_md5``: that package's index entry carries a wrong checksum.
    """
    facts = {}
    lines = ['<?xml version="1.0"?>', "<nltk_data>", "  <packages>"]
    for ident, (subdir, build) in PACKAGES.items():
        data = build()
        path = root / "packages" / subdir / f"{ident}.zip"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            unzipped = sum(i.file_size for i in zf.infolist())
        md5 = hashlib.md5(data).hexdigest()
        if ident == wrong_md5:
            md5 = hashlib.md5(b"something else").hexdigest()
        facts[ident] = {"subdir": subdir, "size": len(data), "unzipped_size": unzipped, "md5": md5, "data": data}
        lines.append(
            f'    <package id="{ident}" name="{ident}" unzip="1" unzipped_size="{unzipped}" size="{len(data)}" '
            f'checksum="{md5}" subdir="{subdir}" '
            f'url="https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/{subdir}/{ident}.zip" />')
    lines.append("  </packages>")
    lines.append("  <collections>")
    for ident, items in (collections or {}).items():
        lines.append(f'    <collection id="{ident}" name="{ident}">')
        lines += [f'      <item ref="{item}" />' for item in items]
        lines.append("    </collection>")
    lines += ["  </collections>", "</nltk_data>", ""]
    (root / "index.xml").write_text("\n".join(lines), encoding="utf-8")
    return facts
