"""``mirror use`` and ``mirror restore``: plan every tool's edit, back up, write atomically.

Everything is planned (and refused if impossible) before the first write, so a
bad ``--tool`` never leaves half the tools switched.
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from prefetch.mirrors.configs.backup import (
    Backup,
    backups_root,
    check_config_target,
    create_backup,
    discard_unapplied,
    list_backups,
    new_operation_id,
    read_text_file,
    select_backups,
    write_atomic,
)
from prefetch.mirrors.configs.marks import claim_hosts, read_marks, settings_lock, write_marks
from prefetch.mirrors.configs.restore import RestoreResult, check_restorable, load_backup, restore_backup
from prefetch.errors import UsageError
from prefetch.mirrors.catalog import Mirror

TOOLS = ("pip", "uv", "conda", "hf")


@dataclass(frozen=True)
class PlannedWrite:
    """One file's current and new text (``old`` None: the file does not exist)."""

    path: Path
    old: str | None
    new: str | None  # None: leave as is

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.old

    def diff(self) -> str:
        """A unified diff of the change ('' when unchanged)."""
        if not self.changed:
            return ""
        before = (self.old or "").splitlines(keepends=True)
        after = (self.new or "").splitlines(keepends=True)
        lines = difflib.unified_diff(
            before,
            after,
            fromfile=str(self.path) if self.old is not None else "/dev/null",
            tofile=str(self.path),
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class ToolPlan:
    """What ``mirror use`` will do for one tool."""

    tool: str
    value: str  # the index / base / endpoint being set
    writes: tuple[PlannedWrite, ...]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    hosts_added: dict[str, list[str]] = field(default_factory=dict)  # path -> hosts we own now

    @property
    def changed(self) -> bool:
        return any(w.changed for w in self.writes)

    def diff(self) -> str:
        return "".join(w.diff() for w in self.writes)


@dataclass(frozen=True)
class ToolOutcome:
    """A tool after ``mirror use``: its plan, and the backup made (None if nothing written)."""

    plan: ToolPlan | None
    tool: str
    backup: Backup | None = None
    skipped: str | None = None  # why this tool was left alone (``--tool all``)


@dataclass(frozen=True)
class UseResult:
    """The outcome of ``prefetch mirror use``."""

    mirror: Mirror
    outcomes: tuple[ToolOutcome, ...]
    dry_run: bool
    operation: str
    pip_effective: object | None = None  # PipEffective after the write, asked of pip
    bench: object | None = None  # BenchReport when NAME was "fastest"

    @property
    def warnings(self) -> list[str]:
        found = [w for o in self.outcomes if o.plan for w in o.plan.warnings]
        effective = self.pip_effective
        if effective is not None and self.mirror.pypi:
            if getattr(effective, "error", None):
                found.append(f"could not ask pip what it uses: {effective.error}")
            elif effective.index_url.rstrip("/") != self.mirror.pypi.rstrip("/") and not any(
                effective.index_url in line for line in found  # (said already, with what to do)
            ):
                found.append(
                    f"pip still resolves from {effective.index_url} (set by {effective.source});"
                    " see the warnings above, or `prefetch mirror show`"
                )
        return found


def parse_tools(text: str) -> tuple[list[str], bool]:
    """``"pip,uv"`` -> (["pip", "uv"], explicit=True); ``"all"`` -> (all tools, False).

    Raises:
        UsageError: an unknown tool name.
    """
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not names:
        raise UsageError("--tool is empty; give pip, uv, conda, hf (comma-separated) or all")
    if "all" in names:
        return list(TOOLS), False
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise UsageError(f"unknown --tool {', '.join(unknown)}; expected pip, uv, conda, hf or all")
    return list(dict.fromkeys(names)), True


def _missing(mirror: Mirror, tool: str, catalog_names: list[str]) -> str:
    need = {"pip": "pypi", "uv": "pypi", "conda": "conda", "hf": "hf"}[tool]
    have = ", ".join(catalog_names) or "none"
    own = f"; it can configure {','.join(mirror.tools)} (--tool {','.join(mirror.tools)})" if mirror.tools else ""
    return f"mirror {mirror.name} has no {need} URL, so it cannot configure {tool}{own}; mirrors that can: {have}"


def plan_tool(
    mirror: Mirror,
    tool: str,
    *,
    scope: str,
    env: Mapping[str, str],
    state_dir: Path,
    prefix: str | None = None,
    cwd: Path | None = None,
) -> ToolPlan:
    """Plan one tool's edit (reads files; writes nothing)."""
    marks = read_marks(state_dir)

    def owned(path: Path) -> tuple[str, ...]:
        return tuple(marks.get(str(path), {}).get("hosts", []))

    if tool == "pip":
        from prefetch.mirrors.configs import pip as pipconf

        target = pipconf.pip_target_file(scope, env=env, prefix=prefix)
        old = read_text_file(target)
        assert mirror.pypi
        edit = pipconf.edit_pip_conf(
            old, index_url=mirror.pypi, trusted_host=mirror.trusted_host, drop_hosts=owned(target), path=target
        )
        warnings = pipconf.pip_override_warnings(target, index_url=mirror.pypi, env=env, prefix=prefix)
        warnings += pipconf.command_section_warnings(target, edit.text, index_url=mirror.pypi)
        return ToolPlan(
            tool="pip",
            value=mirror.pypi,
            writes=(PlannedWrite(target, old, edit.text),),
            warnings=tuple(warnings),
            hosts_added={str(target): list(edit.hosts_added)},
        )
    if tool == "uv":
        from prefetch.mirrors.configs import uv as uvconf

        target = uvconf.uv_config_path(env=env)
        old = read_text_file(target)
        assert mirror.pypi
        edit = uvconf.edit_uv_toml(
            old, index_url=mirror.pypi, insecure_host=mirror.trusted_host, drop_hosts=owned(target), path=target
        )
        warnings = uvconf.uv_override_warnings(target, index_url=mirror.pypi, env=env, cwd=cwd)
        warnings += uvconf.uv_file_warnings(target, edit.text)
        return ToolPlan(
            tool="uv",
            value=mirror.pypi,
            writes=(PlannedWrite(target, old, edit.text),),
            warnings=tuple(warnings),
            hosts_added={str(target): list(edit.hosts_added)},
        )
    if tool == "conda":
        from prefetch.mirrors.configs import conda as condaconf

        target = condaconf.condarc_path(env=env)
        old = read_text_file(target)
        assert mirror.conda
        return ToolPlan(
            tool="conda",
            value=mirror.conda,
            writes=(PlannedWrite(target, old, condaconf.edit_condarc(old, base=mirror.conda)),),
            warnings=tuple(condaconf.conda_override_warnings(env=env)),
            notes=("run `conda clean -i` once so conda drops the index it cached from the old channels",),
        )
    if tool == "hf":
        from prefetch.mirrors.configs import hf as hfconf

        assert mirror.hf
        startup = hfconf.ipython_startup_path(env=env)
        shell_rc = hfconf.shell_rc_path(env=env)
        old_startup = read_text_file(startup)
        old_rc = read_text_file(shell_rc)
        warned = hfconf.hf_override_warnings(mirror.hf, env=env)
        return ToolPlan(
            tool="hf",
            value=mirror.hf,
            writes=(
                PlannedWrite(startup, old_startup, hfconf.render_startup(mirror.hf)),
                PlannedWrite(shell_rc, old_rc, hfconf.edit_shell_rc(old_rc, endpoint=mirror.hf)),
            ),
            warnings=tuple(warned),
            notes=() if warned else tuple(hfconf.hf_notes(mirror.hf)),  # (the warning gives the same advice)
        )
    raise UsageError(f"unknown tool {tool!r}; expected one of {', '.join(TOOLS)}")


def use_mirror(
    name: str,
    *,
    tools: str = "pip",
    scope: str = "user",
    dry_run: bool = False,
    config_dir: Path,
    state_dir: Path,
    env: Mapping[str, str] | None = None,
    deadline: float = 8.0,
    python: str | None = None,
    verify_pip: bool = True,
    prefix: str | None = None,
    among: list[str] | None = None,
) -> UseResult:
    """Point the chosen tools at mirror ``name`` (or the fastest one), with backups.

    For ``fastest``, ``among`` limits the candidates (default: every mirror with a PyPI index).

    Raises:
        MirrorCatalogError: unknown mirror or broken catalog.
        UsageError: a tool the mirror cannot serve was asked for explicitly.
        NetworkError: ``fastest`` and no mirror answered in time.
        LocalFileError: a file could not be backed up or written.
    """
    from prefetch.errors import NetworkError
    from prefetch.mirrors.catalog import load_catalog

    env = os.environ if env is None else env
    tool_list, explicit = parse_tools(tools)
    catalog = load_catalog(config_dir=config_dir)
    bench = None
    if name.strip().lower() == "fastest":
        from prefetch.mirrors.bench import bench_mirrors

        candidates = [catalog.get(n) for n in among] if among else list(catalog.mirrors.values())
        bench = bench_mirrors(
            candidates,
            deadline=deadline,
            project=catalog.bench_project,
            probe_file=catalog.bench_file,
            probe_sha256=catalog.bench_sha256,
        )
        if bench.fastest is None:
            raise NetworkError(
                f"no mirror delivered any bytes within {deadline:g}s ({len(bench.results)} tried);"
                " check the network with `prefetch mirror bench`, or raise --deadline"
            )
        mirror = catalog.get(bench.fastest.name)
    else:
        mirror = catalog.get(name)
    from contextlib import nullcontext

    with nullcontext() if dry_run else settings_lock(state_dir):  # one run at a time reads and writes
        plans: list[ToolOutcome] = []
        for tool in tool_list:
            if tool not in mirror.tools:
                capable = [m.name for m in catalog.mirrors.values() if tool in m.tools]
                if explicit:
                    raise UsageError(_missing(mirror, tool, capable))
                plans.append(ToolOutcome(plan=None, tool=tool, skipped=f"{mirror.name} has no {tool} URL"))
                continue
            plan = plan_tool(mirror, tool, scope=scope, env=env, state_dir=state_dir, prefix=prefix)
            plans.append(ToolOutcome(plan=plan, tool=tool))
        for outcome in plans:  # refuse another user's or a locked file before the first write (and in a dry run)
            for write in outcome.plan.writes if outcome.plan else ():
                if write.changed:
                    check_config_target(write.path)
        operation = new_operation_id()
        if dry_run:
            return UseResult(mirror=mirror, outcomes=tuple(plans), dry_run=True, operation=operation, bench=bench)
        outcomes = []
        marks = read_marks(state_dir)
        for outcome in plans:
            plan = outcome.plan
            if plan is None or not plan.changed:
                outcomes.append(outcome)
                continue
            backup = create_backup(
                [w.path for w in plan.writes if w.changed],
                tool=plan.tool,
                root=backups_root(state_dir),
                mirror=mirror.name,
                operation=operation,
                written={w.path: (w.new or "").encode("utf-8") for w in plan.writes if w.changed},
            )
            # The hosts this edit adds are ours before the file says so: a run killed after the write
            # (Ctrl-C, a kernel restart) never leaves a trusted host of ours that the next `use` keeps.
            claimed = claim_hosts(marks, plan.hosts_added)
            if claimed != marks:
                write_marks(state_dir, claimed)
            try:
                for write in plan.writes:
                    if write.changed:
                        write_atomic(write.path, (write.new or "").encode("utf-8"))
            except BaseException:  # (a read-only folder, a full disk, Ctrl-C): no backup of an edit never made
                if discard_unapplied(backup) and claimed != marks:
                    write_marks(state_dir, marks)
                raise
            for path, hosts in plan.hosts_added.items():
                if hosts:
                    marks[path] = {"hosts": hosts}
                else:
                    marks.pop(path, None)
            outcomes.append(ToolOutcome(plan=plan, tool=plan.tool, backup=backup))
        if any(o.plan and o.plan.hosts_added for o in outcomes):
            write_marks(state_dir, marks)
    pip_effective = None
    if verify_pip and any(o.plan is not None and o.tool == "pip" for o in outcomes):
        from prefetch.mirrors.configs.pip_asked import read_pip_effective

        pip_effective = read_pip_effective(python=python or sys.executable, env=env)
    return UseResult(
        mirror=mirror,
        outcomes=tuple(outcomes),
        dry_run=False,
        operation=operation,
        pip_effective=pip_effective,
        bench=bench,
    )


def restore_mirror(*, state_dir: Path, backup_id: str | None = None, tools: str | None = None) -> list[RestoreResult]:
    """Put back the named backup, the newest of each ``tools``, or the whole last ``use`` run.

    Raises:
        NoBackupError: nothing to restore.
        LocalFileError: a file cannot be written.
    """
    tool_list = parse_tools(tools)[0] if tools else None
    if not backups_root(state_dir).is_dir():  # never a backup: nothing to lock, nothing to create
        select_backups(backups_root(state_dir), backup_id=backup_id, tools=tool_list)  # raises NoBackupError
    with settings_lock(state_dir):  # not while a `use` or another restore reads and writes
        root = backups_root(state_dir)
        chosen = select_backups(root, backup_id=backup_id, tools=tool_list)
        operation = new_operation_id()
        loaded = [load_backup(backup) for backup in chosen]  # every copy checked before the first write
        ours = frozenset(f.written_sha256 for b in list_backups(root) for f in b.files if f.written_sha256)
        for backup in chosen:
            check_restorable(backup)
        results = [
            restore_backup(backup, root=root, operation=operation, blobs=blobs, ours=ours)
            for backup, blobs in zip(chosen, loaded)
        ]
        # hosts we had added are no longer ours once the old file is back
        marks = read_marks(state_dir)
        touched = {str(f.path) for r in results for f in r.files}
        if touched & set(marks):
            write_marks(state_dir, {k: v for k, v in marks.items() if k not in touched})
        return results


def list_restorable(*, state_dir: Path, tools: str | None = None) -> list[Backup]:
    """Every backup, newest first (optionally for some tools)."""
    tool_list = parse_tools(tools)[0] if tools else None
    found = list_backups(backups_root(state_dir))
    return [b for b in found if tool_list is None or b.tool in tool_list]
