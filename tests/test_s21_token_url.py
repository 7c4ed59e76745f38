"""A URL whose user part is a token alone (``https://TOKEN@host/x``, as git hosts and private
registries take one) keeps the token out of a job's command line, record and log (a real
``prefetch get -b`` against a local origin that asks for it).

``user:password@`` has been stored as ``user:***@`` since the nineteenth sitting, but a user
part without a colon was kept as typed: ``status --json`` printed the token in the notebook's
output and the job's record kept it. Now it is ``***@`` there, the worker gets the real URL in
its environment, and a resume from a new shell is refused
in one line, as for a hidden password. (requests, and so prefetch, sends no ``Authorization``
for a user part without a password, where curl sends ``TOKEN:``: the token is a secret either way.)
"""

from __future__ import annotations

from prefetch.errors import ExitCode
from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_proxies import everything_written

TOKEN = "ghp0Tok3nSecretValue"


def test_a_token_in_a_urls_user_part_is_kept_out_of_the_job(home, tmp_path):
    with OriginServer() as origin:
        origin.put("d.bin", b"d" * 10_000)
        url = origin.url_for("d.bin").replace("http://", f"http://{TOKEN}@")
        started = run_cli("get", url, "-o", str(tmp_path / "d.bin"), "-b", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        waited = run_cli("wait", "--timeout", "100", cwd=tmp_path, timeout=150)
        assert waited.returncode == 0, (waited.stdout, waited.stderr)
    assert (tmp_path / "d.bin").read_bytes() == b"d" * 10_000
    shown = run_cli("status", "--json", cwd=tmp_path)
    assert shown.returncode == 0 and "http://***@127.0.0.1:" in shown.stdout, shown.stdout
    logs = list((home / ".prefetch").rglob("*.log"))
    assert logs
    for output in (started.stdout + started.stderr, waited.stdout, shown.stdout, run_cli("status").stdout,
                   *(log.read_text(errors="replace") for log in logs)):
        assert TOKEN not in output, output
    assert TOKEN not in everything_written(home)  # (the record too)

    job = started.stdout.split()[2]
    resumed = run_cli("resume", job, cwd=tmp_path)
    assert resumed.returncode == ExitCode.USAGE, (resumed.stdout, resumed.stderr)
    assert len(resumed.stderr.strip().splitlines()) == 1 and "run the same" in resumed.stderr, resumed.stderr
