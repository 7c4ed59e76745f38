"""A 503 storm on the connections of one host: its "at most N connections" notes are coalesced
(one a second or so, the latest cap said, with how many refusals it covers), not a line per
refused connection ("at most 7 ... at most 6 ... at most 1")."""

from __future__ import annotations

import os
import re

from tests.origin import Status


def test_a_storm_of_refusals_says_its_cap_once_a_second_and_ends_on_the_latest(home, origin, tmp_path, cli):
    origin.rate = 200_000  # each file ~0.5 s: the one answered delivers while the others are refused
    names = [f"f{i}.bin" for i in range(8)]
    data = {n: os.urandom(100_000) for n in names}
    for name, body in data.items():
        origin.put(name, body)
    for _ in range(7):  # all 8 are asked at once (nothing has answered yet); 7 of them get a 503
        origin.add_fault(Status(503, method="GET"))
    listing = tmp_path / "urls.txt"
    listing.write_text("".join(origin.url_for(n) + "\n" for n in names))
    out = tmp_path / "out"
    proc = cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "8", "--connections", "1")
    assert proc.returncode == 0, proc.stderr
    assert all((out / n).read_bytes() == body for n, body in data.items())
    assert [r for r in origin.requests if r.status == 503], "the storm happened"
    notes = re.findall(r"refused (a connection|\d+ connections) \(HTTP 503\); at most (\d+) connections? to it "
                       r"from now on", proc.stdout + proc.stderr)
    assert 1 <= len(notes) <= 2, proc.stdout + proc.stderr  # 7 lines before
    assert notes[-1][1] == "1", notes  # the latest cap is said, not the first
    said = sum(1 if what == "a connection" else int(what.split()[0]) for what, _ in notes)
    assert said <= 7, notes
