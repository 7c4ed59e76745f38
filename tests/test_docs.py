"""The documentation: the docs/ site builds cleanly, and the README stays a landing page.

``mkdocs build --strict`` fails on any warning, and mkdocs.yml turns a broken link or
anchor and a page left out of the nav into warnings, so each of those fails here. The
build must need no network: the subprocess gets proxies that lead nowhere, so a plugin
that tried to fetch something over HTTP would fail the build.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_README_LINES = 300

# [text](target) and [text](target "title"); images too. Code spans and fences are skipped.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _relative_links(text: str) -> list[str]:
    return [t for t in LINK.findall(_prose(text)) if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", t, re.I)]


def _anchors(page: Path) -> set[str]:
    """The heading ids mkdocs gives ``page`` (Python-Markdown's toc slugs)."""
    from markdown.extensions.toc import slugify

    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    headings = [m.group(2) for m in map(HEADING.match, text.splitlines()) if m]
    return {slugify(re.sub(r"`([^`]*)`", r"\1", h), "-") for h in headings}


def test_docs_build_strict(tmp_path):
    env = dict(os.environ)
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = "http://127.0.0.1:9"  # the discard port: nothing leaves the machine
    for name in ("no_proxy", "NO_PROXY"):
        env.pop(name, None)
    env["NO_MKDOCS_2_WARNING"] = "1"  # mkdocs-material's banner about its successor
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, (
        "mkdocs build --strict failed (mkdocs-material comes with pip install -e '.[test]'):\n"
        + proc.stdout + proc.stderr
    )
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "architecture" / "index.html").is_file()


def test_readme_is_a_landing_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move reference text into docs/"
    )


def test_readme_links_point_at_existing_files():
    links = _relative_links(README.read_text(encoding="utf-8"))
    assert any(t.startswith("docs/") for t in links), "the README links into docs/"
    broken = []
    for target in links:
        path, _, anchor = target.partition("#")
        file = (ROOT / path).resolve()
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading with id {anchor!r} in {path}")
    assert not broken, "README.md links that lead nowhere:\n" + "\n".join(broken)


def test_link_checker_sees_links():
    """The checks above would pass vacuously if the link pattern stopped matching."""
    text = "see [get](docs/commands/get.md#options) and [x](https://example.org) `[no](code.md)`"
    assert _relative_links(text) == ["docs/commands/get.md#options"]
    assert "options" in _anchors(ROOT / "docs" / "commands" / "get.md")
    assert "private-servers-header-and-netrc" in _anchors(ROOT / "docs" / "commands" / "get.md")
