"""One host's connection budget, shared by every prefetch process of this user on this machine.

Within a process, :class:`prefetch.engine.hosts.Host` keeps the files to one host within its
cap (``host_connections``). Fifty ``get -b`` jobs each kept their own: against one nginx they
opened 255 connections at once, and mirrors throttle or ban an address that does that. Here
the processes share the cap through the host's slot file under the state dir
(``fs/slots.py``): each connection a process may have open (a worker's, or a warm one kept for
the next file) holds one slot, a one-byte open-file-description lock.

* **A process alone** takes the lowest slot it does not hold: one non-blocking ``fcntl`` per
  connection opened (a warm connection passed from file to file keeps its slot), nothing per
  request; it gets every connection it got before.
* **Extra connections** (beyond a process's first to the host) are taken only while a slot
  is free; when none is, the transfer asks again on its next pass, as when its own host's
  connections are all in use.
* **The first connection** is never refused for good (no job starves behind others): a
  process with no slot marks itself waiting (``WAITING``) and waits while some process holds
  extra connections (``EXTRAS``). Every process with a slot looks at the mark every ``LOOK``
  seconds: while it is there, no process takes an extra connection (a slot freed is the
  waiter's), and each holding extra ones runs one connection fewer (its worker ends after its
  request, its connection is closed, its slot freed) until the waiter has one: the wait is one
  of its requests (about a second of a connection's bytes, at least ``request_min``; 0.9 s
  measured through a 200 ms route, 5 s from loopback nginx whose bursts make requests long:
  docs/speed-log.md), and nothing is sent ahead on a connection that is to step back
  (``engine/ahead.py``). When every slot is some
  process's only connection (more processes than the cap), the newcomer opens its one
  connection without a slot, over the cap, and takes a slot as soon as one is free.
* **Warm connections of a host no file of the process runs to** (a job that moved on to
  another host) give their slots back, all but one, when another process waits
  (``engine/idle_slots.py``: a thread looks every ``LOOK`` seconds while the host is idle).
* The cap is the process's ``host_connections`` (slots ``[0, cap)``). A 429/503 lowers the
  cap of the process that met it only (``Host.refused``): a lowered cap is not shared.

Where there are no OFD locks, or the slot file cannot be opened safely, nothing is shared
(each process keeps its own budget, as before). All methods are called with the host's lock
held; none of them waits.
"""

from __future__ import annotations

from prefetch.fs.slots import EXTRAS, WAITING, SlotFile, open_slots

LOOK = 0.25  # seconds between looks at the WAITING mark by a process holding extra connections
RETRY = 0.05  # seconds before an extra connection refused for want of a free slot is asked again


def open_shared(directory: str, host: str, cap: int) -> "SharedSlots | None":
    """``host``'s slots under ``directory`` for a process whose cap is ``cap`` (None: nothing shared here)."""
    slots = open_slots(directory, host)
    return None if slots is None else SharedSlots(slots, cap)


class SharedSlots:
    """This process's slots of one host's slot file."""

    def __init__(self, slots: SlotFile, cap: int) -> None:
        self.file = slots
        self.cap = max(1, cap)
        self.held: list[int] = []  # slot indices this process holds (one per connection it may have open)
        self.bare = False  # the process's one connection has no slot (every slot was someone's only one)
        self.waiting = False  # WAITING is held: no connection yet, others asked to make room
        self.waiting_since = 0.0  # when this wait for a first connection began (monotonic)
        self.extras = False  # EXTRAS is held: more than one slot here
        self.yield_to: int | None = None  # others wait: keep at most this many connections
        self.others_wait = False  # another process waited for its first connection at the last look
        self.shed_at = 0.0  # when yield_to was last set (monotonic)
        self.next_look = 0.0
        self.refused_at = -RETRY  # when an extra connection last found no free slot
        self.closed = False  # the run is over (Host.close): nothing held, nothing refused

    @property
    def allowance(self) -> int:
        """Connections this process may have open to the host now."""
        return len(self.held) or int(self.bare)

    @property
    def limit(self) -> int | None:
        """At most this many connections while another process waits for its first (None: no such limit)."""
        return self.yield_to

    def grow(self, want: int, now: float) -> bool:
        """May this process have ``want`` connections open? Takes the slots that needs (never waits)."""
        if want <= self.allowance or self.closed:
            return True
        if self.allowance and (self.others_wait or self.yield_to is not None and want > self.yield_to):
            return False  # another process waits for its first connection: a free slot is its, not an extra
        if self.held and now - self.refused_at < RETRY:
            return False  # (all taken a moment ago: a transfer asks every pass, a lock call each is enough)
        while self.allowance < want:
            index = self.file.take(cap=self.cap, skip=self.held)
            if index is None:
                break
            self.held.append(index)
            self.bare = False
        if self.allowance:
            self._marks()  # (a slot taken drops the WAITING mark, whether or not all that was wanted)
            if self.allowance >= want:
                return True
            self.refused_at = now
            return False
        # No slot for the first connection: ask the holders of extra ones to make room, and
        # wait while there are any; else (every slot is someone's only one) go over the cap.
        if not self.waiting:
            self.waiting_since = now
        self._mark_waiting(True)
        if self.file.marked(EXTRAS):
            return False
        self.bare = True
        return True

    def shrink(self, want: int) -> None:
        """This process needs ``want`` connections now: the slots beyond go back."""
        if self.closed:
            return
        while len(self.held) > max(0, want):
            self.file.give(self.held.pop())
        if want <= 0:
            self.bare = False
            self._mark_waiting(False)
        self._marks()

    def look(self, now: float) -> None:
        """Every ``LOOK`` seconds: a bare connection takes a slot if one is free; a process with
        extra connections sees whether another waits for its first (then it runs one fewer)."""
        if now < self.next_look or self.closed:
            return
        self.next_look = now + LOOK
        if self.bare:
            index = self.file.take(cap=self.cap, skip=self.held)
            if index is not None:
                self.held.append(index)
                self.bare = False
                self._mark_waiting(False)
        self.others_wait = bool(self.held) and self.file.marked(WAITING)
        if len(self.held) < 2:
            self.yield_to = None
        elif self.yield_to is not None and (len(self.held) > self.yield_to or now - self.shed_at < LOOK):
            pass  # still making room (a worker ends after its request), or the waiter is taking it
        elif self.others_wait:
            self.yield_to, self.shed_at = len(self.held) - 1, now
        else:
            self.yield_to = None

    def someone_waits(self) -> bool:
        """Whether another process waits for its first connection to the host now (one ``fcntl``)."""
        return not self.closed and self.file.marked(WAITING)

    def close(self) -> None:
        """Every slot and mark goes (the run is over)."""
        self.held.clear()
        self.bare = self.waiting = self.extras = False
        self.yield_to, self.others_wait = None, False
        self.closed = True
        self.file.close()

    def _marks(self) -> None:
        if self.waiting and self.held:
            self._mark_waiting(False)
        extras = len(self.held) > 1
        if extras != self.extras:
            self.extras = extras
            self.file.mark(EXTRAS, extras)

    def _mark_waiting(self, on: bool) -> None:
        if on != self.waiting:
            self.waiting = on
            self.file.mark(WAITING, on)
