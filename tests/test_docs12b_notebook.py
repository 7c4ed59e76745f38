"""docs/getting-started.md's output "as rendered in a real kernel" is what a real kernel renders.

The page's block after "As rendered in a real kernel:" shows two cells and their output. Both
run in a real ipykernel (tests/kernel.py), as typed on the page, against a local origin:

* ``!prefetch status`` while the page's own ``!prefetch get cifar10 imdb -b`` runs (the
  synthetic Keras datasets under the built-in names, through the config dir's
  ``registry.toml``; the origin throttled so that one file is still downloading);
* ``!prefetch get http://127.0.0.1:PORT/big-file-v2.bin -o data/``, a 5 MiB file.

Between the two, the page's ``(x, y), _ = keras.datasets.cifar10.load_data()`` runs in the
same kernel after ``!prefetch wait`` and must not reach the origin.

What Jupyter shows is compared line by line with the page, by shape: job ids, byte counts,
percentages, speeds, ETAs, durations, the port and the notebook's folder stand for any value;
every other character (columns, words, the order of lines, each file's row) must match. The
progress line the page describes in words must be rewritten in place, and gone at the end.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from prefetch.jobs import list_jobs
from tests import datasets_synth
from tests.docs_pages import page_cells
from tests.test_jobs import poll

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "getting-started.md"
MiB = 1 << 20

SIZE = r"\d+(?:\.\d+)?(?:B|KiB|MiB|GiB)"
SHAPES = [
    (re.compile(r"\bj\d{4}-[0-9a-f]{4}\b"), "<job>"),
    (re.compile(rf"{SIZE}/s\b"), "<speed>"),
    (re.compile(rf"{SIZE}/{SIZE}"), "<bytes>/<total>"),
    (re.compile(r"\d+\.\d+s\b"), "<seconds>"),
    (re.compile(r"\b\d+(?:\.\d)?%"), "<pct>"),
    (re.compile(r"\b\d+:\d\d\b"), "<eta>"),
]


def shape(line: str, *, port: str, cwd: str) -> str:
    """``line`` with every value that differs run to run replaced by its kind; columns kept as single spaces."""
    line = line.replace(cwd, "<cwd>").replace(f"127.0.0.1:{port}", "127.0.0.1:<port>")
    for pattern, kind in SHAPES:
        line = pattern.sub(kind, line)
    return " ".join(line.split())


def shown_cells() -> list[tuple[str, list[str]]]:
    """(command, the output lines the page shows for it) of the "as rendered" block."""
    text = PAGE.read_text(encoding="utf-8")
    block = re.search(r"As rendered in a real kernel:\s*\n\n```text\n(.*?)^```", text, re.M | re.S)
    assert block, "getting-started.md shows output 'As rendered in a real kernel:'"
    cells: list[tuple[str, list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("!"):
            cells.append((line[1:], []))
        elif line.strip():
            cells[-1][1].append(line)
    return cells


def shown_progress_line() -> str:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    m = re.search(r"\(While it runs, one more line, `([^`]+)`, is rewritten in place", text)
    assert m, "getting-started.md describes the progress line rewritten in place"
    return m.group(1)


# Keras checks the real datasets' hashes, which the synthetic files cannot match (as in
# test_notebook.py); a download Keras tries itself fails the cell.
KERAS_PRELUDE = """%env KERAS_BACKEND=numpy
import keras.src.utils.file_utils as file_utils
def no_download(url, *args, **kwargs):
    raise AssertionError(f"Keras tried to download {url}")
file_utils.validate_file = lambda *args, **kwargs: True
file_utils.urlretrieve = no_download
import keras
"""


@pytest.fixture
def served(origin, home):
    files = datasets_synth.build_files()
    datasets_synth.serve_files(origin, files)
    datasets_synth.write_registry(Path(os.environ["PREFETCH_HOME"]) / "config" / "registry.toml", origin.url, files,
                                  names=["cifar10", "imdb"])
    origin.put("big-file-v2.bin", os.urandom(5 * MiB))
    return origin


def test_getting_started_output_is_what_a_kernel_renders(kernel, served, home):
    origin = served
    port = origin.url.rsplit(":", 1)[1].strip("/")
    cwd = str(Path(home).parent / "notebook")  # (the kernel fixture's cwd)
    (status_cmd, status_shown), (get_cmd, get_shown) = shown_cells()
    assert status_cmd == "prefetch status" and get_cmd.startswith("prefetch get http://127.0.0.1:")
    doc_port = re.search(r"127\.0\.0\.1:(\d+)/", get_cmd).group(1)
    doc_cwd = re.search(r"downloaded (.*)/data/big-file-v2\.bin$", get_shown[-1]).group(1)

    # The page's own background get, the origin slow enough that one file is still on its way.
    origin.total_rate = 3 << 10
    started = kernel.run("!prefetch get cifar10 imdb -b")
    assert "started job j" in started.rendered, started.rendered

    def one_done_one_going():
        (job,) = list_jobs()
        states = {f.name: (f.state, f.bytes) for f in job.files}
        return (states.get("imdb.npz", ("", 0))[0] == "done"
                and states.get("imdb_word_index.json", ("", 0))[0] == "done"
                and states.get("cifar-10-python.tar.gz", ("", 0))[1] > 0)

    poll(one_done_one_going, what="imdb done and cifar10 under way", timeout=60)
    # cifar10 stays on its way while the cells below run, however long a loaded machine takes
    # for them (27.8 KiB at 256 B/s: 100 s and more). At 3 KiB/s it had about 9 s, and at load
    # 15 it was done before a `!prefetch status` showed its speed: the page's row never came.
    origin.total_rate = 256
    for _ in range(20):  # (until the downloading row has a speed and an ETA, as the page shows it)
        status = kernel.run("!prefetch status")
        going = [line for line in status.lines if "downloading" in line]
        if going and all(re.search(r"/s\s+\d+:\d\d$", line) for line in going):
            break
    want = [shape(line, port=doc_port, cwd=doc_cwd) for line in status_shown]
    got = [shape(line, port=port, cwd=cwd) for line in status.lines]
    assert got == want, "getting-started.md's `!prefetch status` is not what the kernel shows:\n" + status.rendered
    origin.total_rate = None
    waited = kernel.run("!prefetch wait")
    assert " done (3 files in place)" in waited.rendered, waited.rendered  # cifar10 (1 file), imdb (2)

    # The page's next line, in the same kernel: Keras finds cifar10 in place ("no network touched").
    (load,) = [code for kind, code in page_cells(PAGE) if kind == "python" and "cifar10.load_data()" in code]
    before = len(origin.requests)
    loaded = kernel.run(KERAS_PRELUDE + load + "print('cifar10', x.shape)\n", timeout=300)
    assert loaded.error is None, loaded.error
    assert "cifar10 (50000, 32, 32, 3)" in loaded.rendered, loaded.rendered
    assert len(origin.requests) == before

    origin.total_rate = 2 * MiB  # a few seconds: the progress line has time to show
    got_cell = kernel.run("!" + get_cmd.replace(f"127.0.0.1:{doc_port}", f"127.0.0.1:{port}"))
    assert (Path(cwd) / "data" / "big-file-v2.bin").stat().st_size == 5 * MiB
    want = [shape(line, port=doc_port, cwd=doc_cwd) for line in get_shown]
    got = [shape(line, port=port, cwd=cwd) for line in got_cell.lines]
    assert got == want, "getting-started.md's foreground get is not what the kernel shows:\n" + got_cell.rendered
    progress = shape(shown_progress_line(), port=doc_port, cwd=doc_cwd)
    drawn = {shape(part, port=port, cwd=cwd) for line in got_cell.raw.split("\n") for part in line.split("\r")}
    assert progress in drawn, (progress, got_cell.raw[-2000:])  # drawn while it ran ...
    assert progress not in got  # ... and gone once the file is done
