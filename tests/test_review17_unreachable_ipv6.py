"""A refused connect to an IPv6 address is said with the address in brackets.

``net/unreachable``'s line named ``host:port`` by joining them with a colon: for
``http://[::1]:PORT/`` it said ``::1:PORT: Connection refused`` (``prefetch get`` on this
machine), which reads as another IPv6 address and cannot be pasted back into a URL, while the
retry notes before it said ``[::1]:PORT``. Now the line writes the address as a URL does. (The
line itself, from the connects' errors as the engine collects them: CI machines may have no
IPv6 loopback to refuse a real connect.)
"""

from __future__ import annotations

import errno

from prefetch.net.unreachable import REFUSED_TRIES, verdict


def test_a_refused_ipv6_address_is_named_in_brackets():
    line = verdict([("::1", 8081, errno.ECONNREFUSED, "Connection refused")], REFUSED_TRIES)
    assert line is not None and line.startswith("[::1]:8081: Connection refused"), line
    both = verdict([("2001:db8::1", 80, errno.ENETUNREACH, "Network is unreachable"),
                    ("mirror.example", 443, errno.ENETUNREACH, "Network is unreachable")], 3)
    assert "([2001:db8::1]:80, mirror.example:443)" in both, both
    assert verdict([("10.9.9.1", 80, errno.EHOSTUNREACH, "No route to host")], 3).startswith("10.9.9.1:80: ")
