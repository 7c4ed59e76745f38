"""One download: a file from one or more sources into ``<final>.part``, resumably.

Owns:
    transfer.py       ``download_to_part``: generations of workers until the file is whole
    worker_calls.py   what a worker calls on its transfer: go on, write, record, take a segment
    single.py         a small file from a near host in one answer, before (and instead of) a transfer
    bulk.py           the bulk lane's wire: many small files' GETs pipelined on a near host's connections
    bulk_head.py      the strict HTTP/1.1 heads the lane frames its pipelined answers by
    preconnect.py     a long route's connections, opened while the probe's answer is on its way
    demotion.py       dropping a source that disagrees, demoting one far slower than the rest
    part_state.py     the .part, its running hash and its state snapshots during a transfer
    options.py        ``TransferOptions``/``TransferResult`` (connections, deadlines, headers)
    schedule.py       which byte ranges go to which connection; the route judge
    ramp.py           how many connections a file gets (the ramp), and its rate meter
    sources.py        several URLs for one file: health, demotion, restarts
    fetcher.py        one ranged request on one connection
    accept_answer.py  where that request's range ends, and what its accepted answer tells the transfer
    ahead.py          its next request, sent before its answer ends (HTTP/1.1 pipelining)
    inline.py         a request on the file's own thread: its read buffer and stop watch
    response_check.py is this answer the bytes asked for (status, Content-Range, validators)
    stream.py         a body into the file, hashing the contiguous prefix
    resume_state.py   the state file beside the ``.part`` (validators, done ranges)
    resume_check.py   without a hash, kept bytes sampled against the origin before a resume
    part_file.py      the ``.part`` itself; ranges.py: byte range sets
    retry.py          back off, step back or give up; ratelimit.py: ``--limit-rate``
    recovery.py       when a cap a server's 429/503 set is tried higher again
    hosts.py          what the transfers to one host share: connection budget, warm connections, route
    near.py           is a host near: its route judge, late answers weighed as the machine's or the route's
    pooled.py         a client a host lends a worker, counted against its cap, given back warm
    idle_slots.py     a host's warm connections while no file of it runs: slots for a process that waits
    shared_budget.py  a host's cap shared by the user's processes on this machine (slot locks)
    many.py           many files at once: started in order on a bounded pool (files and hf:// repos)

May import: ``errors``, ``model``, ``fs``, ``net``. Knows nothing of datasets,
caches or jobs: it is given URLs and paths.
"""
