"""``prefetch doctor``: what is configured, and why downloads may fail, per source.

Owns:
    checks.py   the report: dirs, free space, Keras, mirrors, package configs
    proxy_checks.py  each proxy variable, and whether its proxy takes a connection as its scheme says
    report.py   the report's data: a check's level, line and hint
    hide_secrets.py  the report without the configured URLs' passwords
    sources.py  each configured source tried for real (DNS, connect, TLS, a ranged read)
    reach_host.py  a host's name and TLS context as get has them (the PREFETCH_RESOLVE hook)

May import every layer below ``jobs``.
"""
