"""A job resumed from a cell that sets another proxy goes on through that proxy, and that proxy
is the job's from then on: a later resume from a shell that sets none (a new kernel) uses it,
not the first cell's (AutoDL's ``network_turbo`` replaced by another proxy, the first one gone).
Before, the record kept the first cell's proxy list for ever. tinyproxy, for real.
"""

from __future__ import annotations

import json
import random
import time

from tests.conftest import run_cli
from tests.proxies import TinyProxy
from tests.test_hosted14_proxy import _without_proxies
from tests.test_jobs import job_id_from
from tests.test_jobs_kill import kill_worker
from tests.test_proxies import env_with


def _writing(part, at_least: int) -> None:
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size > at_least):
        assert time.monotonic() < deadline, "the job never wrote"
        time.sleep(0.05)


def test_the_proxy_of_the_resuming_cell_is_the_jobs_from_then_on(home, origin, tmp_path):
    data = random.Random(1519).randbytes(3_000_000)
    origin.put("t.bin", data)
    origin.total_rate = 300 << 10
    final = tmp_path / "data" / "t.bin"
    part = final.with_name("t.bin.part")
    with TinyProxy(tmp_path / "first") as first, TinyProxy(tmp_path / "second") as second:
        env = env_with(http_proxy=first.url, no_proxy="localhost")
        env.pop("NO_PROXY", None)
        started = run_cli("get", origin.url_for("t.bin"), "-o", str(final), "-b", env=env)
        assert started.returncode == 0, started.stderr
        job = job_id_from(started.stdout)
        _writing(part, 0)
        kill_worker(job)
        asked_first = first.log().count("GET http://127.0.0.1")

        other = dict(_without_proxies(env), http_proxy=second.url, no_proxy="localhost")
        assert run_cli("resume", job, env=other).returncode == 0
        deadline = time.monotonic() + 60
        while second.log().count("GET http://127.0.0.1") == 0 and first.log().count("GET http://127.0.0.1") == asked_first:
            assert time.monotonic() < deadline, "the resumed job never asked"
            time.sleep(0.05)
        kill_worker(job)
        through_first, through_second = (p.log().count("GET http://127.0.0.1") for p in (first, second))
        assert through_second >= 1 and through_first == asked_first, (through_first, through_second, asked_first)
        (record,) = json.loads(run_cli("status", job, "--json", env=other).stdout)["jobs"]

        origin.total_rate = None
        fresh = _without_proxies(env)  # a new kernel: no proxy set
        resumed = run_cli("resume", job, env=fresh)
        assert resumed.returncode == 0, resumed.stderr
        assert run_cli("wait", job, "--timeout", "60", env=fresh).returncode == 0
        assert final.read_bytes() == data
        assert first.log().count("GET http://127.0.0.1") == through_first  # not the first cell's proxy again
        assert second.log().count("GET http://127.0.0.1") > through_second
    assert "t.bin" in json.dumps(record)
