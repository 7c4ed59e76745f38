"""Where output lands: terminal, notebook ``!`` cell, log file, Python progress bars.

Owns:
    style.py      colour or not (``NO_COLOR``, ``FORCE_COLOR``), notebook-cell detection, tables
    render.py     event lines for logs and terminals, the one rewritten line in a cell
    many.py       many files summarized: files done/total, bytes, rate, ETA, files in flight
    units.py      sizes and durations as people read them
    progress.py   tqdm.auto bars for the Python API (``ensure``, ``wait``)
    interrupt.py  Ctrl-C and kernel interrupts turned into a stop event

May import: ``errors``, ``model``. Knows records only by their attributes; never
the flow, the engine or jobs. tqdm is imported lazily.
"""
