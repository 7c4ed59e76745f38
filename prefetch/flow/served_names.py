"""``--content-disposition``: a URL's file named by its server, before its download starts.

A plan marked ``served_name`` (a URL given no ``out=``/``-o``, with the option) is planned under
its URL's name; here, before the engine sees it, one ``GET`` (redirects followed, the request's
``--header`` values, proxies and timeouts, as the download's own first request) reads the
answer's ``Content-Disposition``. In a run of at most ``HANDED`` files that request is the
download's own first one (``Range: bytes=0-`` up to the first window), and its open answer is
kept for the download, which reads on from it (no request is spent on the name: a single-use
link still gives its file); in a longer list it is ``Range: bytes=0-0``, one request more per
link. The header: ``filename*=`` (RFC 5987, UTF-8 or
ISO-8859-1) first, then ``filename=``, as wget ``--content-disposition`` and curl ``-OJ`` read it.
The plan's final path becomes that name in the same folder, so everything after (the lock, the
``.part`` and its state, resume, the hash check, extraction, a job's restart, which asks again
and finds its ``.part``) works as for any URL.

The name is hostile input: only its last ``/`` component is kept, and a name that is empty or
blank, ``.``/``..``, starts with a dot, starts or ends with a space, holds a control character, an invisible or
direction-changing format character (U+202E shows ``invoice\u202etxt.exe`` as
``invoiceexe.txt``), a line or paragraph separator or a backslash, is not valid UTF-8, or is
too long for the folder's filesystem with prefetch's suffixes keeps the URL's name, with one
note; so does an answer without the header, one the probe cannot get, a name another file of
the same command already takes (or whose ``.part``/``.part.json``/``.part.lock`` it is, or that is its own),
and a name under which the folder already holds something prefetch did not download (the
server does not choose which of the user's files is replaced; one prefetch completed there, or
one matching the ``--sha256``/``--md5`` given, is found complete, as for any URL), or a file
prefetch downloaded there from another link (its record names another link,
``net.urls.link_key``; a record of an earlier version names none: then a size that is not the
one this link's server gives): another link's file its server named alike, taken for this one,
was "cached" with the other's bytes. A download never fails over the header. The final path
is a single name inside the folder chosen, and is placed by the same rules as any other (never
through a link prefetch did not create).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

from prefetch.model.events import SAVED_AS, Event, EventKind, EventSink
from prefetch.model.plans import FilePlan

# One parameter: ; name = "quoted \" string" | token (RFC 6266's grammar, read leniently).
_PARAM = re.compile(r';\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"?|[^;]*)')
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})  # control, format (bidi, zero-width), ...
# (cache/layout.py's part_path and state_path, and the lock beside the file: fs/locks.py's BESIDE)
_PARTIAL_SUFFIXES = (".part", ".part.json", ".part.lock")


PROBES_AT_ONCE = 8  # names asked for together (a -i list of many links pays a round trip per 8, not per link)
HANDED = 4  # a run of at most this many files: each name's request is its download's first, kept for it


def name_plans(plans: list[FilePlan], *, options, on_event: EventSink, check_name,
               records_dir: Path | None = None, locks_dir: Path | None = None,
               handed: dict | None = None) -> list[FilePlan]:
    """``plans`` with each ``served_name`` one's final path named by its server (see the module).

    ``check_name(path)``: raises ``UsageError`` for a name the folder's filesystem cannot hold
    (``planning.check_name_length``). ``records_dir``: prefetch's completion records (a file
    already at the served name is used only when one says prefetch placed it; None: never). A
    renamed file says so in a note (``saved as NAME``: a job's record shows that path from then
    on). With ``locks_dir``, a ``.part`` an earlier run left under the URL's name (its probe
    failed, the download began, then stopped) moves to the served name, with its state, and the
    download resumes from it (:func:`_adopt_part`).

    ``handed``: where a run of at most ``HANDED`` files (``options.transfer.hosts`` set) keeps each
    name's answer for its download (:func:`_first_request`), unless a folder of theirs holds a
    ``.part`` (a download to resume, whose first window is on disk); the caller passes it on as
    ``FetchOptions.handed`` and gives back what is left (:func:`give_back`)."""
    asked = [i for i, p in enumerate(plans) if p.served_name]
    if not asked:
        return plans
    keep = handed if handed is not None and len(plans) <= HANDED else None
    if keep is not None and any(_has_partials(plans[i].final.parent) for i in asked):
        keep = None  # (an earlier run's .part to resume: a first window asked from byte 0 would be wasted)
    answers = _ask(sorted({plans[i].spec.url for i in asked}), options, keep)
    taken = {p.final for p in plans}
    out = list(plans)
    for i in asked:  # (in plan order: the first of two URLs given one name keeps it)
        out[i] = _named(plans[i], answers[plans[i].spec.url], taken, on_event, check_name, records_dir)
        if out[i] is not plans[i]:
            on_event(Event(EventKind.NOTE, plans[i].label, message=f"{SAVED_AS}{out[i].final.name}"))
            if locks_dir is not None:
                _adopt_part(plans[i], out[i], locks_dir, on_event)
    return out


def _adopt_part(was: FilePlan, now: FilePlan, locks_dir: Path, on_event: EventSink) -> None:
    """The ``.part`` (and state) an earlier run left under ``was``'s name for this very URL
    (its state lists it) becomes ``now``'s, under both names' locks (this home's and the ones beside
    the files: a run of another home downloading it holds those), when ``now`` has none: it
    would otherwise stay there for ever, and its bytes be fetched again. Only a regular file of
    this user's with one name moves; anything else stays as it is."""
    import json
    import os
    import stat

    from prefetch.cache.layout import part_path, state_path
    from prefetch.errors import PrefetchError
    from prefetch.fs.beside_locks import beside_lock
    from prefetch.fs.locks import hold_lock
    from prefetch.fs.safefs import is_foreign, lstat_or_none, open_file

    old_part, old_state = part_path(was.final), state_path(was.final)
    new_part, new_state = part_path(now.final), state_path(now.final)
    if lstat_or_none(old_part) is None or lstat_or_none(new_part) is not None or lstat_or_none(new_state):
        return
    try:  # (both names' locks, this home's and the ones beside the files, every home's and user's: no
        # other run downloads either now; a download holds its name's throughout)
        with hold_lock(locks_dir, was.final, timeout=0), hold_lock(locks_dir, now.final, timeout=0), \
                beside_lock(was.final, timeout=0, record=False), beside_lock(now.final, timeout=0, record=False):
            if lstat_or_none(new_part) is not None or lstat_or_none(new_state) is not None:
                return
            try:
                fd = open_file(old_state)  # (regular, ours, never through a link)
                with os.fdopen(fd, "rb") as f:
                    urls = json.loads(f.read(1 << 20)).get("urls") or []
            except (OSError, ValueError, AttributeError):
                return
            if was.spec.url not in urls:
                return
            st = lstat_or_none(old_part)
            if st is None or not stat.S_ISREG(st.st_mode) or is_foreign(st) or st.st_nlink > 1:
                return  # (a link, another user's file, a second name: never moved)
            os.rename(old_state, new_state)
            os.rename(old_part, new_part)
    except (PrefetchError, OSError):
        return  # (another process holds it, or the rename failed: the download starts afresh)
    on_event(Event(EventKind.NOTE, now.label, message=f"--content-disposition: resuming from {old_part.name}, "
                                                        f"left under the URL's name by an earlier run"))


def _ask(urls: list[str], options, handed: dict | None = None) -> dict[str, tuple[str | None, str, int | None]]:
    """Each URL's (Content-Disposition or None, why none, the file's size or None), asked ``PROBES_AT_ONCE`` at a time, a
    client per thread (its connections kept for the thread's next URL); with ``handed``, each
    by its download's first request, kept there (:func:`_first_request`) when a slot is free."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from prefetch.net.http import Client

    transfer = options.transfer
    factory = options.client_factory or Client
    headers = dict(transfer.headers)
    local, clients, lock = threading.local(), [], threading.Lock()

    def one(url: str) -> tuple[str | None, str, int | None]:
        if handed is not None and transfer.hosts is not None:
            got = _first_request(url, options, headers, handed)
            if got is not None:
                return got
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = factory(timeouts=transfer.timeouts, resolve=transfer.resolve)
            with lock:
                clients.append(client)
        return _served_header(url, client, headers)

    try:
        if len(urls) == 1:
            return {urls[0]: one(urls[0])}
        with ThreadPoolExecutor(max_workers=min(PROBES_AT_ONCE, len(urls)), thread_name_prefix="name") as pool:
            return dict(zip(urls, pool.map(one, urls)))
    finally:
        for client in clients:
            client.close()


def _first_request(url: str, options, headers: dict[str, str], handed: dict):
    """Ask ``url`` for its name with the request its download would send first (``Range: bytes=0-``
    up to ``PREFETCH_FIRST_REQUEST``, on one of its host's connection slots and warm clients, as
    ``engine/single.py`` does) and keep the open answer in ``handed`` for that download, which
    reads on from it: a link that takes one request (a single-use token, a presigned GET with
    one use left) is not spent on its name, and a small file costs one request in all. None
    when no slot is free now (the name is asked apart, as before)."""
    import time

    from prefetch.engine.single import Handover
    from prefetch.net.http import open_url

    transfer = options.transfer
    host = transfer.hosts.host_for(url)
    if not host.try_lease():
        return None
    client = host.lender(options.client_factory)(timeouts=transfer.timeouts, resolve=transfer.resolve)
    end = "" if transfer.connections == 1 else str(transfer.first_request - 1)
    asked = time.monotonic()
    try:
        resp, final_url = open_url(client, url, headers={**headers, "Range": f"bytes=0-{end}"},
                                   timeouts=transfer.timeouts)
    except Exception as exc:  # noqa: BLE001 - as _served_header: the download asks again and says what is wrong
        client.close()
        host.release()
        return None, f"the server could not be asked for the file's name ({exc})", None
    handed[url] = (host, Handover(client, resp=resp, final_url=final_url, latency=time.monotonic() - asked))
    return (resp.headers.get("Content-Disposition"), "the server's answer names no file (no Content-Disposition)",
            _size_of(resp))


def _has_partials(folder: Path) -> bool:
    """``folder`` holds a ``.part`` (an earlier run's, perhaps this file's under its server's
    name: its name is not known before the answer); False for a folder not there yet."""
    try:
        with os.scandir(folder) as entries:
            return any(entry.name.endswith(".part") for entry in entries)
    except OSError:
        return False


def give_back(handed: dict | None) -> None:
    """The kept answers no download took over (its file was found in place, the run stopped):
    closed, their connection slots given back."""
    while handed:
        _, (host, handover) = handed.popitem()
        handover.close()
        host.release()


def _named(plan: FilePlan, answer: tuple[str | None, str, int | None], taken: set[Path], on_event: EventSink,
           check_name, records_dir: Path | None) -> FilePlan:
    value, problem, size = answer
    name, why = served_file_name(value) if value is not None else (None, problem)
    if name is not None and name != plan.final.name:
        final = plan.final.parent / name
        why = _unusable(final, plan.final, taken, check_name, records_dir, plan.spec.hashes, size, plan.spec.url)
        if why is None:
            taken.discard(plan.final)
            taken.add(final)
            return replace(plan, final=final, spec=replace(plan.spec, target=str(final)))
    if why:
        on_event(Event(EventKind.NOTE, plan.label, message=f"--content-disposition: {why}; saved under the URL's "
                                                             f"name {plan.final.name}"))
    return plan


def _served_header(url: str, client, headers: dict[str, str]) -> tuple[str | None, str, int | None]:
    """(the answer's Content-Disposition or None, why there is none, the file's size if it says)."""
    import http.client

    from prefetch.errors import PrefetchError
    from prefetch.net.failures import TransientHTTPError
    from prefetch.net.http import _discard, open_url

    try:
        resp, _ = open_url(client, url, headers={**headers, "Range": "bytes=0-0"})
    except (PrefetchError, TransientHTTPError, OSError, http.client.HTTPException) as exc:
        # (the download asks again with its retries, and says in its own line what is wrong)
        return None, f"the server could not be asked for the file's name ({exc})", None
    try:
        value = resp.headers.get("Content-Disposition")
        size = _size_of(resp)
    finally:
        _discard(resp)
    return value, "the server's answer names no file (no Content-Disposition)", size


def _size_of(resp) -> int | None:
    """The whole file's size an answer to ``Range: bytes=0-0`` gives (a 206's Content-Range
    total, a 200's Content-Length), or None."""
    if resp.status == 206:
        total = (resp.headers.get("Content-Range") or "").rpartition("/")[2].strip()
    elif resp.status == 200:
        total = (resp.headers.get("Content-Length") or "").strip()
    else:
        return None
    return int(total) if total.isdigit() else None


def served_file_name(value: str) -> tuple[str | None, str]:
    """(the file name ``value`` gives, or None, and why not). ``filename*=`` wins over ``filename=``."""
    params: dict[str, str] = {}
    for key, raw in _PARAM.findall(";" + value.partition(";")[2]):
        raw = raw.strip()
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1] if raw.endswith('"') and len(raw) > 1 else raw[1:])
        params.setdefault(key.lower(), raw)
    name = None
    extended = params.get("filename*")
    if extended is not None:
        charset, _, rest = extended.partition("'")
        encoded = rest.partition("'")[2]
        if charset.lower() in ("utf-8", "iso-8859-1") and encoded:
            try:
                name = unquote(encoded, encoding=charset.lower(), errors="strict")
            except (UnicodeDecodeError, LookupError):
                name = None
    if name is None and "filename" in params:
        name = params["filename"]
        try:  # (servers send UTF-8 bytes; the HTTP reader took them as ISO-8859-1)
            name = name.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    if name is None:
        return None, "the server's Content-Disposition names no file"
    name = name.rpartition("/")[2]  # (its last path component only)
    shown = ascii(name[:60])  # (the reason is shown: never the character it is refused for)
    if name in ("", ".", "..") or not name.strip():
        return None, f"the server's file name {shown} is not a file name"
    if name.startswith("."):
        return None, f"the server's file name {shown} starts with a dot (a hidden file)"
    if name != name.strip():  # (" .bashrc" lists as a dotfile; "train.csv " as train.csv)
        return None, f"the server's file name {shown} starts or ends with a space"
    if _CONTROL.search(name) or "\\" in name:
        return None, f"the server's file name {shown} holds a control character or a backslash"
    import unicodedata  # (a get without the option never loads it)

    if any(unicodedata.category(c) in _HIDDEN_CATEGORIES for c in name if c > "\x7f"):
        return None, (f"the server's file name {shown} holds an invisible or direction-changing character (shown as"
                      " another name) or a line separator")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return None, f"the server's file name {shown} is not valid text"
    return name, ""


def _unusable(final: Path, own: Path, taken: set[Path], check_name, records_dir: Path | None,
              hashes=(), size: int | None = None, url: str = "") -> str | None:
    """Why ``final`` (the server's name in the plan's folder, instead of ``own``) cannot be used, or None."""
    from prefetch.errors import UsageError

    shown = ascii(final.name[:60])
    if final in taken:
        return f"the server's file name {shown} is another file's of this command"
    path = str(final)
    for suffix in _PARTIAL_SUFFIXES:
        name = path[:-len(suffix)] if path.endswith(suffix) else None
        if name and Path(name) in taken and Path(name) != own:
            return (f"the server's file name {shown} is where {os.path.basename(name)!r} of this command is "
                    f"{'locked' if suffix == '.part.lock' else 'downloaded to'}")
    if any(Path(path + suffix) in taken and Path(path + suffix) != own for suffix in _PARTIAL_SUFFIXES):
        return f"the server's file name {shown} would be downloaded to another file's of this command"
    try:
        check_name(final)
    except UsageError:
        return f"the server's file name {final.name[:40]!r}... is too long for this folder"
    why = _already_there(final, records_dir, hashes, size, url)
    if why:
        return f"{os.path.dirname(path) or '.'} already has {shown}: {why}"
    return None


def _already_there(final: Path, records_dir: Path | None, hashes=(), size: int | None = None,
                   url: str = "") -> str | None:
    """What sits at ``final`` that is not a file prefetch completed there from this link (its
    record names ``url``'s link, or none; of this link's ``size``, when the server said it:
    another link's file its server named alike is not this one), nor (given ``hashes``, the
    request's) one of the user's that matches them all (None: nothing, or one of those)."""
    import stat

    from prefetch.cache.completion import completion_matches, read_completion
    from prefetch.fs import safefs
    from prefetch.net.urls import same_link

    try:
        st = safefs.lstat_or_none(final)
    except OSError:
        return "something prefetch did not download"
    if st is None:
        return None
    if stat.S_ISREG(st.st_mode) and records_dir is not None and completion_matches(records_dir, final, st):
        link = (read_completion(records_dir, final, st) or {}).get("link")
        if isinstance(link, str) and url and not same_link(link, url):
            return "a file prefetch downloaded from another link"
        if size is None or st.st_size == size:
            return None
        return (f"a file prefetch downloaded from another link ({st.st_size} bytes; this link's file has {size})")
    if hashes and stat.S_ISREG(st.st_mode) and not safefs.is_foreign(st):
        from prefetch.fs.hashing import first_mismatch

        try:  # (the file the user asked for, by its hashes: found in place, as at any final path)
            if first_mismatch(final, hashes) is None:
                return None
        except OSError:
            pass
    kind = "a link" if stat.S_ISLNK(st.st_mode) else "a file" if stat.S_ISREG(st.st_mode) else "something"
    return f"{kind} prefetch did not download"
