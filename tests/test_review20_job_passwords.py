"""A job keeps no ``--mirror`` or Hub endpoint password: not in its command line (as ``status``,
``status --json`` and the job's log show it), not in its record (a real ``prefetch get -b``).

- ``--mirror https://USER:PASSWORD@mirror/`` (a private mirror's login) went into the job's
  command line as typed: ``status --json`` printed it in the notebook's output, and the job's log
  (``jobs/<id>.log``, 0644 under a state dir others may read) kept it, where each URL name was
  shown with its password as ``***``.
- The record kept it too, and since dea65b9 the ``HF_ENDPOINT``/``MODELSCOPE_ENDPOINT`` of the
  cell that started the job, password and all, where docs/where-files-go.md says a URL's
  ``user:password@`` never is. Both are stored with the password as ``***`` now and passed to
  the worker in its environment, as a URL name's password is; a resume from a shell that sets
  no endpoint variable is refused in one line (set it again), as one through a proxy with a
  password is.
"""

from __future__ import annotations

import os

import pytest

from prefetch.errors import UsageError
from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_proxies import everything_written


def test_a_mirror_password_is_not_in_a_jobs_command_line(home, tmp_path):
    with OriginServer() as origin:
        origin.put("d.bin", b"d" * 10_000)
        base = origin.url_for("d.bin").rpartition("/")[0]
        mirror = base.replace("http://", "http://alice:Mirr0rPass@") + "/"
        started = run_cli("get", "http://127.0.0.1:9/d.bin", "--mirror", mirror, "-o", str(tmp_path / "d.bin"),
                          "-b", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        waited = run_cli("wait", "--timeout", "100", cwd=tmp_path, timeout=150)
        assert waited.returncode == 0, (waited.stdout, waited.stderr)  # (through the mirror, with its login)
    assert (tmp_path / "d.bin").read_bytes() == b"d" * 10_000
    shown = run_cli("status", "--json", cwd=tmp_path)
    text = run_cli("status", cwd=tmp_path)
    assert shown.returncode == 0 and text.returncode == 0, shown.stderr + text.stderr
    assert "alice:***@" in shown.stdout, shown.stdout
    logs = list((home / ".prefetch").rglob("*.log"))
    assert logs
    for output in (started.stdout + started.stderr, waited.stdout + waited.stderr, shown.stdout, text.stdout,
                   *(log.read_text(errors="replace") for log in logs)):
        assert "Mirr0rPass" not in output, output
    assert "Mirr0rPass" not in everything_written(home)  # (the record too)


@pytest.mark.parametrize(("variable", "name", "field"), [("HF_ENDPOINT", "hf://acme/tiny", "hub_endpoint"),
                                                         ("MODELSCOPE_ENDPOINT", "ms://acme/tiny", "ms_endpoint")])
def test_a_pinned_endpoint_keeps_its_password_out_of_the_record(home, monkeypatch, variable, name, field):
    """As a worker plans the record's request: with the launcher's environment (the password
    passed there), and as a resume from a shell that sets no endpoint variable."""
    from prefetch.flow.planning import plan_request
    from prefetch.flow.request import GetRequest, job_environment, restore_url_passwords
    from prefetch.jobs.launch import pin_request

    for other in ("HF_ENDPOINT", "MODELSCOPE_ENDPOINT", "MODELSCOPE_DOMAIN"):
        monkeypatch.delenv(other, raising=False)
    endpoint = "http://alice:HubPass@127.0.0.1:7/hub"
    pinned = pin_request(GetRequest(names=[name]), dict(os.environ, **{variable: endpoint}))
    stored = pinned.to_dict()
    assert "HubPass" not in repr(stored) and stored[field] == "http://alice:***@127.0.0.1:7/hub", stored

    worker = GetRequest.from_dict(stored)  # the first run: the launcher passed the password
    restore_url_passwords(worker, job_environment(pinned, dict(os.environ)))
    plans, _ = plan_request(worker, env=dict(os.environ))
    assert [p.endpoint for p in plans] == [endpoint]

    resumed = GetRequest.from_dict(stored)  # a resume from a fresh shell: nothing passed
    with pytest.raises(UsageError, match=f"set {variable} again"):
        plan_request(resumed, env=dict(os.environ))
    chosen, _ = plan_request(resumed, env=dict(os.environ, **{variable: "http://127.0.0.1:8"}))
    assert [p.endpoint for p in chosen] == ["http://127.0.0.1:8"]
