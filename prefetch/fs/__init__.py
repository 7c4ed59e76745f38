"""The local filesystem, safely: no write through a link prefetch did not make.

Owns:
    safefs.py     ``O_NOFOLLOW`` opens, ownership checks, atomic rename, tree removal
    made_dirs.py  folders a run created and left empty, removed at its end (never one another run holds)
    files.py      atomic ``replace_file``, free space, ``OSError`` -> ``LocalFileError``
    paths.py      prefetch's own state and config dirs (``PREFETCH_HOME``, platformdirs)
    locks.py      per-file locks that name their owner (pid, host, start), stale-lock breaking
    beside_locks.py the lock beside a target (``<final>.part.lock``): every home's and user's runs
    lock_files.py a lock file's own ``flock`` (never through a planted link), one named file's lock
    processes.py  is a pid alive, and still the same process; this process's CPU and run-queue seconds;
                  were the machine's CPUs contended lately (PSI)
    slots.py      a host's connection slots, one byte lock each, shared by the user's processes
    hashing.py    md5/sha256 of files and byte ranges, hash checks

May import: ``errors``, ``model``.
"""
