"""The team store as a source of ``get`` (``--mirror s3://...``) and its seeding (``--seed``).

Before a file is downloaded, its ``s3://`` source URLs are turned into URLs the transfer
engine can GET: a presigned (or, anonymously, plain) URL for each object the store has
with the right hash; objects it lacks are left out. With ``--seed`` the first machine to
miss an object claims it (a small claim object written with ``If-None-Match: *``),
fetches the file from the other sources and uploads it; the others wait for the object
to appear and read it from the store, so the outside world serves each file about once.
The claimer renews its claim while it works; a claim not renewed for the lease (a seeder
that died) is taken over.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from prefetch.errors import StoreError
from prefetch.model.events import Event, EventKind, EventSink
from prefetch.store.claims import claim_age, claim_body, dead_here
from prefetch.store.s3 import Store, error_code, is_s3_url, open_store, rebind_state, split_object_url, store_error

CLAIMS = ".prefetch-claims/"
DEFAULT_LEASE = 120.0  # seconds a claim holds without renewal; its holder renews it every lease/4


@dataclass
class StoreSources:
    """The ``FetchOptions.sources`` hook for ``s3://`` sources; seeds when ``seed`` is set."""

    seed: str | None = None  # s3://BUCKET/PREFIX to seed, or None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    state_dir: Path | None = None
    lease: float = DEFAULT_LEASE
    poll: float = 1.0
    timeouts: object | None = None  # engine.options.Timeouts of the run's downloads (None: from env)
    _stores: dict[str, Store] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _claimed: set[str] = field(default_factory=set)  # object URLs this process claimed
    _lacking: set[str] = field(default_factory=set)  # object URLs the store lacked
    _wrong: set[str] = field(default_factory=set)  # object URLs whose bytes were not the file
    _fallback: dict[str, list[str]] = field(default_factory=dict)  # final path -> other sources
    _labels: dict[str, str] = field(default_factory=dict)  # presigned URL -> s3:// object URL
    _renewer: threading.Thread | None = None
    _down: dict[str, StoreError] = field(default_factory=dict)  # store URL -> why it is unavailable this run

    def __post_init__(self) -> None:
        self._released = threading.Condition(self._lock)  # a claim was released: the renewer may end

    def store_for(self, url: str) -> Store:
        location, _ = split_object_url(url)
        with self._lock:
            if location.url not in self._stores:
                self._stores[location.url] = open_store(location, env=self.env, timeouts=self.timeouts)
            return self._stores[location.url]

    # -- before a download ---------------------------------------------------
    def resolve(self, plan, urls: list[str], *, state: Path, on_event: EventSink,
                stop: threading.Event | None = None) -> list[str]:
        """``urls`` with each ``s3://`` object replaced by an HTTP URL, or left out when absent.

        Raises:
            StoreError, MissingExtraError.
        """
        resolved: list[str] = []
        from_seed: str | None = None
        for url in urls:
            if not is_s3_url(url):
                resolved.append(url)
                continue
            seeding = self.seed is not None and url.startswith(self._seed_base())
            try:
                http = self._source_or_stop(plan, url, seeding=seeding, on_event=on_event, stop=stop)
            except StoreError as exc:
                self._note_down(url, exc)
                if not any(not is_s3_url(u) for u in urls):
                    raise
                # The store is a shortcut: when it fails, the file's other sources still work.
                on_event(Event(EventKind.NOTE, plan.label, message=f"{exc}; using the other sources"))
                http = None
            if http is not None:
                resolved.append(http)
                with self._lock:
                    self._labels[http] = url
                from_seed = http if seeding else from_seed
        if from_seed is not None:
            # The team store has it: read it from there alone, so the outside world serves
            # each file once per team; the other sources are the fallback if the store fails.
            with self._lock:
                self._fallback[str(plan.final)] = [u for u in resolved if u != from_seed]
            resolved = [from_seed]
        rebind_state(state, resolved)
        return resolved

    def label(self, url: str) -> str:
        """The ``s3://`` name of a presigned URL this hook made (other URLs unchanged)."""
        with self._lock:
            return self._labels.get(url, url)

    def relabel(self, exc: BaseException) -> BaseException:
        """``exc`` naming each presigned URL this hook made by its ``s3://`` name (as it is,
        signed or redacted), so that an error about a store object says which object, with
        no endpoint, signature or key id in it. The same exception, its message rewritten."""
        from prefetch.net.urls import redact_url

        text = str(exc)
        with self._lock:
            labels = list(self._labels.items())
        changed = text
        for http, name in labels:
            for form in (http, redact_url(http)):
                changed = changed.replace(form, name)
        if changed != text and exc.args:
            exc.args = (changed, *exc.args[1:])
        return exc

    def fallback(self, plan, *, wrong: bool = False) -> list[str]:
        """The other sources of a file read from the seed store alone (once; then empty).

        ``wrong``: the store's object is not the file (a hash or size mismatch), so ``finish``
        replaces it with the verified file instead of trusting its metadata.
        """
        with self._lock:
            others = self._fallback.pop(str(plan.final), [])
            if wrong and others and self.seed is not None:
                from prefetch.store.s3 import parse_store_url

                self._wrong.add(parse_store_url(self.seed).url_for(plan.spec.name))
            return others

    def _seed_base(self) -> str:
        from prefetch.store.s3 import parse_store_url

        return parse_store_url(self.seed).url

    def _note_down(self, url: str, exc: StoreError) -> None:
        """Remember a store that did not answer (after botocore's retries) for the rest of the run."""
        if getattr(exc, "unavailable", False):
            with self._lock:
                self._down.setdefault(split_object_url(url)[0].url, exc)

    def _down_error(self, url: str) -> StoreError | None:
        """The error of a store found unavailable earlier in this run, or None."""
        with self._lock:
            exc = self._down.get(split_object_url(url)[0].url)
        if exc is None:
            return None
        error = StoreError(f"{exc} (earlier in this run: not asked again)")
        error.unavailable = True
        return error

    def _source_or_stop(self, plan, url: str, *, seeding: bool, on_event: EventSink, stop) -> str | None:
        """``_object_source``, unless the run stops before the store answers (store/abandon.py):
        then the run goes on without it, and a claim the call takes afterwards is released."""
        from prefetch.errors import InterruptedTransferError
        from prefetch.store.abandon import Abandoned, call_or_abandon

        if stop is not None and stop.is_set():
            raise InterruptedTransferError(f"{plan.label}: stopped before asking the store")
        with self._lock:
            held = url in self._claimed
        left = threading.Event()

        def sink(event) -> None:  # nothing is said for a call the run left behind
            if not left.is_set():
                on_event(event)

        try:
            return call_or_abandon(
                lambda: self._object_source(plan, url, seeding=seeding, on_event=sink, stop=stop), stop,
                on_abandoned=lambda _: None if held else self._unclaim(url))
        except Abandoned:
            left.set()
            raise InterruptedTransferError(f"{plan.label}: stopped; the store had not answered about {url}") from None

    def _unclaim(self, url: str) -> None:
        """Release a claim taken for a run that no longer waits for it."""
        with self._lock:
            if url not in self._claimed:
                return
            self._claimed.discard(url)
            self._lacking.discard(url)
            self._released.notify_all()
        self._release(self.store_for(url), split_object_url(url)[1])

    def _object_source(self, plan, url: str, *, seeding: bool, on_event: EventSink, stop) -> str | None:
        down = self._down_error(url)
        if down is not None:  # each file would wait out the same retries again
            raise down
        store = self.store_for(url)
        _, name = split_object_url(url)
        announced = False
        while True:
            if self._has(store, name, plan):
                if announced:
                    on_event(Event(EventKind.NOTE, plan.label, message=f"{url} is in the store now; reading it from there"))
                return store.http_url(name)
            if not seeding:
                if store.lacks_bucket():  # a typo in the URL, or the bucket was never made
                    raise StoreError(f"store: the bucket {store.location.bucket!r} does not exist"
                                     f"{' at ' + store.endpoint if store.endpoint else ''}; create it or fix the URL")
                on_event(Event(EventKind.NOTE, plan.label, message=f"the store has no {url} (with the expected hash)"))
                return None
            holder = self._claim(store, name)
            if holder is None and self._has(store, name, plan):
                # A seeder uploaded it and released its claim between our HEAD and our claim.
                self._release(store, name)
                continue
            if holder is None:
                with self._lock:
                    self._claimed.add(url)
                    self._lacking.add(url)
                    if self._renewer is None:
                        self._renewer = threading.Thread(target=self._renew_claims, name="prefetch-claims",
                                                         daemon=True)
                        self._renewer.start()
                on_event(Event(EventKind.NOTE, plan.label,
                               message=f"the store lacks {url}: fetching it from the other sources to seed it"))
                return None
            if not announced:
                on_event(Event(EventKind.NOTE, plan.label,
                               message=f"waiting for {holder}, which is seeding {url} to the store"))
                announced = True
            if stop is not None and stop.wait(self.poll):
                from prefetch.errors import InterruptedTransferError

                raise InterruptedTransferError(f"{plan.label}: stopped while waiting for the store")
            if stop is None:
                time.sleep(self.poll)

    def _has(self, store: Store, name: str, plan) -> bool:
        head = store.head(name)
        if head is None:
            return False
        if plan.spec.size is not None and head["size"] != plan.spec.size:
            return False
        from prefetch.fs.hashing import digest_mismatch

        # Each hash the object's metadata gives (push writes sha256 and md5) must be the file's: a
        # right sha256 beside a wrong md5 is not the file asked for. One it lacks (put there by
        # other means) is checked after the download.
        return digest_mismatch(head["metadata"], plan.spec.hashes) is None

    def _claim(self, store: Store, name: str) -> str | None:
        """Claim seeding ``name``: None when it is ours now, else who holds it."""
        bucket, key = store.location.bucket, store.location.key_for(CLAIMS + name)
        body = claim_body()
        for _ in range(3):
            try:
                store.client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
                return None
            except Exception as exc:  # noqa: BLE001
                if error_code(exc) not in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                    raise store_error(exc, f"claim s3://{bucket}/{key}") from None
            try:
                answer = store.client.get_object(Bucket=bucket, Key=key)
                body = answer["Body"].read()
            except Exception:  # noqa: BLE001 - gone meanwhile: try again
                continue
            holder, age = claim_age(body, answer.get("LastModified"))
            if age <= self.lease and not dead_here(holder):
                return f"{holder.get('host', '?')} (pid {holder.get('pid', '?')})"
            try:  # a seeder that died: take over its claim
                store.client.delete_object(Bucket=bucket, Key=key)
            except Exception:  # noqa: BLE001
                pass
        return "another seeder"

    def _renew_claims(self) -> None:
        """Rewrite our claims every lease/4 so that waiting seeders know we are alive; end once
        no claim is held (a kernel that seeded in many runs keeps no thread, nor its clients)."""
        interval = max(0.5, self.lease / 4)
        while True:
            with self._lock:
                deadline = time.monotonic() + interval
                while self._claimed and (left := deadline - time.monotonic()) > 0:
                    self._released.wait(left)
                if not self._claimed:
                    self._renewer = None  # the next claim starts another
                    return
                claimed = list(self._claimed)
            for url in claimed:
                store = self.store_for(url)
                _, name = split_object_url(url)
                body = claim_body()
                try:
                    store.client.put_object(Bucket=store.location.bucket,
                                            Key=store.location.key_for(CLAIMS + name), Body=body)
                except Exception:  # noqa: BLE001 - a missed renewal only shortens the lease
                    pass
                with self._lock:
                    released = url not in self._claimed
                if released:  # (during the PUT: the store may apply it after the release's DELETE)
                    self._release(store, name)

    def _release(self, store: Store, name: str) -> None:
        try:
            store.client.delete_object(Bucket=store.location.bucket, Key=store.location.key_for(CLAIMS + name))
        except Exception:  # noqa: BLE001 - the lease ends it anyway
            pass

    # -- after a file ----------------------------------------------------------
    def finish(self, plan, result, *, on_event: EventSink, stop: threading.Event | None = None) -> None:
        """Upload a verified file the seed store lacks; release our claim either way. A run
        stopped (Ctrl-C, a stream left early) does not start the upload, and stops one between
        parts, resumable: the next run's seeding continues it. A store that has not answered
        half a second after the stop is left to finish on its own (store/abandon.py)."""
        if self.seed is None:
            return
        from prefetch.store.abandon import Abandoned, call_or_abandon

        left = threading.Event()

        def sink(event) -> None:
            if not left.is_set():
                on_event(event)

        try:
            call_or_abandon(lambda: self._finish(plan, result, on_event=sink, stop=stop), stop)
        except Abandoned:
            left.set()
            on_event(Event(EventKind.NOTE, plan.label, message=f"not seeding {plan.spec.name}: the run was stopped "
                           "and the store had not answered (a claim left behind ends with its lease)"))

    def _finish(self, plan, result, *, on_event: EventSink, stop: threading.Event | None) -> None:
        from prefetch.store.s3 import parse_store_url

        url = parse_store_url(self.seed).url_for(plan.spec.name)
        store = self.store_for(url)
        with self._lock:
            claimed = url in self._claimed
            wrong = url in self._wrong
            lacking = url in self._lacking or wrong
            self._claimed.discard(url)
            self._wrong.discard(url)
            self._released.notify_all()
        try:
            ok = result.status in ("downloaded", "cached") and (result.verified or plan.spec.expected is None)
            if not ok:
                return
            down = self._down_error(url)
            if down is not None:
                raise down
            if stop is not None and stop.is_set():
                on_event(Event(EventKind.NOTE, plan.label, message=f"not seeding {url}: the run was stopped"))
                return
            if not lacking and self._has(store, plan.spec.name, plan):
                return
            from prefetch.store.push import part_size_from_env, push_file

            state_dir = self.state_dir or Path(".")
            pushed = push_file(store, plan.final, plan.spec.name, state_dir=state_dir,
                               part_size=part_size_from_env(self.env), replace=wrong, stop=stop)
            on_event(Event(EventKind.NOTE, plan.label, message=f"seeded the store: {pushed.status} {pushed.url}"))
        except Exception as exc:  # noqa: BLE001 - seeding is a service to others: the file itself is fine
            from prefetch.errors import PrefetchError

            if isinstance(exc, StoreError):
                self._note_down(url, exc)
            text = str(exc) if isinstance(exc, PrefetchError) else repr(exc)
            on_event(Event(EventKind.NOTE, plan.label, message=f"could not seed the store: {text}"))
        finally:
            if claimed:
                self._release(store, plan.spec.name)
