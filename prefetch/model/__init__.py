"""The plain records every layer passes: specs, plans, results, events.

Owns:
    specs.py   ``FileSpec``/``DatasetSpec`` (what a planner knows of a file before
               fetching it) and ``ExpectedHash``/``parse_hash``
    plans.py   ``FilePlan`` (where one file goes), ``FileResult`` (how fetching it
               ended), ``VerifyResult``, ``overall_exit_code``
    events.py  ``Event``/``EventKind``/``EventSink``: progress as the flow reports it
    lean.py    ``dataclass``: ``dataclasses``' records with one compile per class (start-up)
    lazy.py    ``lazy_names``: a package's names loaded from their modules on first access

May import: ``prefetch.errors`` only. Nothing here does I/O.
"""
