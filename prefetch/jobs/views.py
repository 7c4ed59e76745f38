"""Jobs as people read them: table rows, a short repr, an HTML table for notebooks.

Used by ``prefetch status`` (text table), by ``JobRecord``/``JobList`` reprs in
a notebook, and by ``prefetch.watch()``. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Sequence

HEADERS = ("JOB", "FILE", "STATE", "BYTES", "%", "SPEED", "ETA")


def _size(n) -> str:
    from prefetch.ui.render import human_bytes

    return "?" if n is None else human_bytes(n)


def shown_state(record) -> str:
    """The job's state as shown: a stopped job whose files a later get put in place is done."""
    if record.state in ("interrupted", "cancelled") and record.in_place:
        return "done"
    return record.state


def shown_name(record, f) -> str:
    """A file's name as shown: its record's (the URL's), or, for ``--content-disposition``, the
    name its server gave once known (its path's, ``flow/served_names.py``)."""
    if (record.request or {}).get("content_disposition") and f.path:
        import os

        return os.path.basename(f.path) or f.name
    return f.name


def table_rows(records, *, files: bool = False) -> list[tuple[str, ...]]:
    """One row per file: JOB FILE STATE BYTES % SPEED ETA (full names, never cut).

    A job of more than ``MANY`` files gets one summary row instead (files done/total,
    failed, the files in flight), unless ``files`` (``status --files``).
    """
    from prefetch.ui.many import MANY
    from prefetch.ui.render import human_bytes, human_seconds

    rows = []
    for r in records:
        if not r.files:
            rows.append((r.id, "-", r.state, "", "", "", ""))
            continue
        if len(r.files) > MANY and not files:
            rows.append(summary_row(r))
            continue
        placed = shown_state(r) != r.state
        for f in r.files:
            state, done, total = f.state, f.bytes, f.total
            if placed and state not in ("done", "cached"):
                state, done = "done", total if total is not None else done
            pct = 100.0 if state in ("done", "cached") else f.percent
            moving = state == "downloading"
            rows.append(
                (
                    r.id,
                    shown_name(r, f) if f.count is None else f"{f.name} ({f.count} file{'s' if f.count != 1 else ''})",
                    state,
                    f"{_size(done)}/{_size(total)}",
                    "" if pct is None else f"{pct:.1f}%",
                    f"{human_bytes(f.rate)}/s" if moving and f.rate else "",
                    human_seconds(f.eta) if moving and f.eta is not None else "",
                )
            )
    return rows


def summary_row(record) -> tuple[str, ...]:
    """One row for a job of many files: ``120/300 files, 2 failed; now a.bin, b.bin +30``."""
    from prefetch.ui.render import human_bytes, human_seconds

    fs = record.files
    placed = shown_state(record) != record.state
    finished = sum(f.state in ("done", "cached") or placed for f in fs)
    failed = sum(f.state == "failed" for f in fs) if not placed else 0
    moving = [f for f in fs if f.state == "downloading"]
    done = sum((f.total or f.bytes) if (f.state in ("done", "cached") or placed) else f.bytes for f in fs)
    totals = [f.total for f in fs]
    total = sum(totals) if all(t is not None for t in totals) else None  # type: ignore[arg-type]
    rate = sum(f.rate for f in moving)
    text = f"{finished}/{len(fs)} files" + (f", {failed} failed" if failed else "")
    if moving:
        text += "; now " + ", ".join(shown_name(record, f) for f in moving[:2]) + (f" +{len(moving) - 2}" if len(moving) > 2 else "")
    pct = 100.0 * done / total if total else None
    eta = (total - done) / rate if total and rate > 0 else None
    return (record.id, text, shown_state(record), f"{_size(done)}/{_size(total)}",
            "" if pct is None else f"{pct:.1f}%", f"{human_bytes(rate)}/s" if rate else "",
            human_seconds(eta) if eta is not None else "")


def text_table(records) -> str:
    """The rows as plain aligned text (no colour)."""
    from prefetch.ui.style import format_table

    if not records:
        return "no jobs"
    return "\n".join(format_table(HEADERS, table_rows(records), right=(3, 4, 5, 6)))


_HTML_COLOURS = {"done": "#1a7f37", "cached": "#1a7f37", "failed": "#cf222e", "corrupt": "#cf222e",
                 "interrupted": "#9a6700", "cancelled": "#9a6700", "downloading": "#0969da"}


def html_table(records) -> str:
    """An HTML table of ``records`` for a notebook's rich output."""
    if not records:
        return "<p>no jobs</p>"
    import html  # (and html.entities): only a notebook's rich output needs them, never a worker or `status`

    head = "".join(f"<th style='text-align:{'right' if i >= 3 else 'left'}'>{h}</th>" for i, h in enumerate(HEADERS))
    body = []
    for row in table_rows(records):
        cells = []
        for i, cell in enumerate(row):
            colour = _HTML_COLOURS.get(cell) if i == 2 else None
            style = f"text-align:{'right' if i >= 3 else 'left'};white-space:nowrap"
            if colour:
                style += f";color:{colour}"
            cells.append(f"<td style='{style}'>{html.escape(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def short_repr(record) -> str:
    """``<JobRecord j0518-a3f9 running: 2 files, 41.0% of 170.5MiB, 2.3MiB/s>``."""
    from prefetch.ui.render import human_bytes

    count = record.file_count  # (a repo's entry counts as its files, once known)
    parts = [f"{count} file{'s' if count != 1 else ''}"]
    total = record.total
    if total:
        parts.append(f"{100.0 * record.bytes / total:.1f}% of {human_bytes(total)}")
    if record.active and record.rate:
        parts.append(f"{human_bytes(record.rate)}/s")
    return f"<JobRecord {record.id} {shown_state(record)}: {', '.join(parts)}>"


class JobList(list):
    """A list of ``JobRecord`` that shows as a table in a notebook (and in ``repr``)."""

    def __repr__(self) -> str:
        return text_table(self)

    def _repr_html_(self) -> str:
        return html_table(self)


def progress_line(records: Sequence) -> str:
    """One line about jobs still running: ids, bytes, %, speed, ETA."""
    from prefetch.ui.render import human_bytes, human_seconds

    running = [r for r in records if r.active]
    if not running:
        return ""
    done = sum(r.bytes for r in running)
    totals = [r.total for r in running]
    total = sum(totals) if totals and all(t for t in totals) else None  # type: ignore[arg-type]
    rate = sum(r.rate for r in running)
    pct = f"{100.0 * done / total:.1f}%" if total else "?%"
    eta = human_seconds((total - done) / rate) if total and rate > 0 else "?"
    ids = ", ".join(r.id for r in running)
    return f"waiting for {ids}: {human_bytes(done)}/{_size(total)} {pct} {human_bytes(rate)}/s eta {eta}"
