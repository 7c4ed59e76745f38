"""``prefetch doctor --json`` holds no password of the URLs it reports: a proxy variable's, pip's
``index-url``'s (one with a quote in it, which the printers' pattern stops at), HF_ENDPOINT's,
PREFETCH_DATASET_MIRROR's. Real CLI; every URL points at a dead port on 127.0.0.1."""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.test_proxies import env_with

SECRETS = ("pr0xyPass", "s3cr3t'Pip", "qu'ote\"Pip", "hfT0ken", "m1rrorPass")


def test_doctor_json_masks_every_configured_password(home, tmp_path):
    pip_conf = home / ".config" / "pip" / "pip.conf"
    pip_conf.parent.mkdir(parents=True)
    pip_conf.write_text("[global]\nindex-url = https://alice:s3cr3t'Pip@127.0.0.1:9/simple\n"
                        "extra-index-url = https://eve:qu'ote\"Pip@127.0.0.1:9/extra\n")
    for proxy in ("http://bob:pr0xyPass@127.0.0.1:9", "bob:pr0xyPass@127.0.0.1:9"):  # (a proxy without its scheme)
        env = env_with(https_proxy=proxy, HF_ENDPOINT="https://carl:hfT0ken@127.0.0.1:9",
                       PREFETCH_DATASET_MIRROR="http://dan:m1rrorPass@127.0.0.1:9/m",
                       PIP_CONFIG_FILE=str(pip_conf))
        proc = run_cli("doctor", "--json", "--deadline", "1", env=env)
        report = json.loads(proc.stdout)
        assert report["checks"], proc.stdout
        shown = proc.stdout + proc.stderr
        for secret in SECRETS:
            assert secret not in shown and json.dumps(secret)[1:-1] not in shown, (secret, shown)
        assert "alice:***@" in shown and "carl:***@" in shown, shown
        text = run_cli("doctor", "--deadline", "1", env=env)
        for secret in SECRETS:
            assert secret not in text.stdout + text.stderr, (secret, text.stdout)
