"""A notebook with its internet off (Kaggle's "Internet" switch, a PAI machine without a public
route): every name fails to resolve (``PREFETCH_RESOLVE='*=fail'``: ``EAI_NONAME``,
``'*=again'``: ``EAI_AGAIN``, Kaggle's "Temporary failure in name resolution"). Before, ``get``
spent its retries (7-9 s) and said "gave up after 7s without a byte"; now the line comes at
once (``EAI_NONAME``) or after three lookups (``EAI_AGAIN``), names the host (or the proxy)
and says the machine may have no internet, exit 3; a ``-b`` job's record says the same. Once
anything was reached, a name that fails keeps the usual retries (a moment's DNS trouble).
"""

from __future__ import annotations

import json
import os

from prefetch.errors import ExitCode
from tests.conftest import run_cli
from tests.test_bad_input import one_error_line
from tests.test_jobs import job_id_from

URL = "https://files.example.org/data/train.bin"
NO_INTERNET = "nothing was reached: this machine may have no internet access"


def _env(resolve: str, **extra) -> dict:
    env = dict(os.environ, PREFETCH_RESOLVE=resolve, PREFETCH_BACKOFF="0.2", PREFETCH_BACKOFF_CAP="0.5")
    env.update(extra)
    return env


def _retry_notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "; retry " in line]


def test_a_name_that_does_not_exist_is_one_line_at_once(home, tmp_path):
    got = run_cli("get", URL, "-P", str(tmp_path), env=_env("*=fail"))
    line = one_error_line(got, ExitCode.NETWORK)  # (one line: no retry notes before it)
    assert "files.example.org: name lookup failed (Name or service not known)" in line, line
    assert NO_INTERNET in line and "Internet" in line, line
    assert os.listdir(tmp_path) == ["home"]  # no .part, no state file


def test_a_resolver_that_cannot_answer_is_asked_three_times_then_one_line(home, tmp_path):
    got = run_cli("get", URL, "-P", str(tmp_path), env=_env("*=again"))
    assert got.returncode == ExitCode.NETWORK, got.stderr
    assert len(_retry_notes(got.stderr)) == 2, got.stderr  # (the default --retries is 8)
    errors = [line for line in got.stderr.splitlines() if line.startswith("prefetch: error: ")]
    assert len(errors) == 1, got.stderr
    assert "Temporary failure in name resolution; 3 tries" in errors[0] and NO_INTERNET in errors[0], errors[0]


def test_every_source_of_a_dataset_is_named(home):
    got = run_cli("get", "mnist", env=_env("*=fail"))
    assert got.returncode == ExitCode.NETWORK, got.stderr
    assert not _retry_notes(got.stderr), got.stderr
    errors = [line for line in got.stderr.splitlines() if line.startswith("prefetch: error: ")]
    assert len(errors) == 1 and NO_INTERNET in errors[0], got.stderr
    assert "storage.googleapis.com" in errors[0] and "s3.amazonaws.com" in errors[0], errors[0]


def test_a_proxy_whose_name_does_not_resolve_is_named(home, tmp_path):
    env = _env("*=fail", https_proxy="http://alice:secret@proxy.corp.example:3128")
    env.pop("NO_PROXY", None)
    line = one_error_line(run_cli("get", URL, "-P", str(tmp_path), env=env), ExitCode.NETWORK)
    assert "the proxy http://proxy.corp.example:3128: name lookup failed" in line, line
    assert "*_proxy" in line and "no internet" in line and "secret" not in line, line


def test_a_hub_endpoint_that_does_not_resolve_is_one_line(home):
    env = _env("*=fail", HF_ENDPOINT="https://hf-mirror.com")
    line = one_error_line(run_cli("get", "hf://openai-community/gpt2", "--include", "config.json", env=env),
                          ExitCode.NETWORK)
    assert "hf-mirror.com: name lookup failed" in line and NO_INTERNET in line, line
    assert "gave up after" not in line, line


def test_a_job_records_the_same_cause(home, tmp_path):
    env = _env("*=again")
    started = run_cli("get", URL, "-P", str(tmp_path / "data"), "-b", env=env)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    waited = run_cli("wait", job, "--timeout", "60", env=env)
    assert waited.returncode == ExitCode.NETWORK and NO_INTERNET in waited.stderr, waited.stderr
    status = run_cli("status", job, "--json", env=env)
    (record,) = json.loads(status.stdout)["jobs"]
    assert record["exit_code"] == ExitCode.NETWORK and NO_INTERNET in record["error"], record
    assert "files.example.org" in record["error"], record
    shown = run_cli("status", job, env=env)
    assert NO_INTERNET in shown.stdout, shown.stdout


def test_a_name_that_fails_after_another_host_answered_keeps_its_retries(home, origin, tmp_path):
    """Something connected (the network works): a failed lookup is a moment's trouble, retried
    (in one process, as a kernel's API calls are: the origin's file, then the name that fails)."""
    from tests.test_faults import get_file

    origin.put("a.bin", b"x" * 1000)
    env = _env("files.example.org=fail", PREFETCH_RETRIES="3", PREFETCH_BACKOFF="0.05", PREFETCH_BACKOFF_CAP="0.1")
    assert get_file(origin.url_for("a.bin"), tmp_path / "a.bin", env=env).exit_code == 0
    events: list = []
    result = get_file(URL, tmp_path / "train.bin", env=env, events=events)
    assert result.exit_code == ExitCode.NETWORK, result.error
    assert sum("; retry " in e.message for e in events if e.message) == 3, [e.message for e in events]
    assert NO_INTERNET not in result.error and "gave up after 3 retries" in result.error, result.error


def test_a_kernel_cell_with_the_internet_off_shows_one_line(kernel, tmp_path):
    """``!prefetch get URL`` in a notebook whose internet is off: the cell shows the two retry
    notes of a resolver that cannot answer, then the one line (before: eight notes, 7-9 s)."""
    assert kernel.run("%env PREFETCH_RESOLVE=*=again").error is None
    cell = kernel.run(f"!prefetch get {URL} -P {tmp_path / 'data'}")
    errors = [line for line in cell.lines if line.startswith("prefetch: error: ")]
    assert len(errors) == 1 and NO_INTERNET in errors[0], cell.rendered
    assert len(_retry_notes(cell.rendered)) == 2, cell.rendered


def test_fewer_retries_than_three_lookups_still_say_why(home, tmp_path):
    got = run_cli("get", URL, "-P", str(tmp_path), "--retries", "1", env=_env("*=again"))
    assert got.returncode == ExitCode.NETWORK, got.stderr
    assert len(_retry_notes(got.stderr)) == 1, got.stderr
    errors = [line for line in got.stderr.splitlines() if line.startswith("prefetch: error: ")]
    assert len(errors) == 1 and "2 tries" in errors[0] and NO_INTERNET in errors[0], got.stderr


def test_doctor_says_no_name_resolves(home):
    """``prefetch doctor`` with the internet off: its sources line says why none works."""
    got = run_cli("doctor", env=_env("*=fail"))
    line = next((x for x in got.stdout.splitlines() if x.startswith("[fail] sources")), "")
    assert "no name resolves: this machine may have no internet access" in line, got.stdout
