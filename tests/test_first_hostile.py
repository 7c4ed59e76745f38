"""A new user's first ten minutes, as their machines are: ``prefetch demo``, ``doctor`` and
``--help`` run as real processes in environments the suite's fixtures do not give them."""

from __future__ import annotations

import os

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
               "no_proxy", "NO_PROXY")


def test_demo_reaches_its_own_local_origin_directly_whatever_proxy_is_set(cli, home):
    # A notebook machine behind a (here dead) proxy, and no no_proxy at all: the demo's origin
    # is its own, on 127.0.0.1, and "needs no network" must hold.
    env = {k: v for k, v in os.environ.items() if k not in _PROXY_VARS}
    env.update(http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", all_proxy="socks5://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", ALL_PROXY="http://127.0.0.1:9")
    result = cli("demo", env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "demo ok: every file verified and in place" in result.stdout
    assert "through the proxy" not in result.stdout + result.stderr


def test_demo_with_stdout_closed_runs_and_is_no_internal_error(home, tmp_path):
    # `prefetch demo >&-` (a launcher that closes stdout): Python's sys.stdout is None.
    import subprocess
    import sys

    result = subprocess.run(["bash", "-c", f"exec {sys.executable} -m prefetch demo >&-"], capture_output=True,
                            text=True, timeout=300, env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert "internal error" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    assert not list(tmp_path.glob("prefetch-demo-*")), "the temporary cache is deleted"


def test_demo_in_a_full_temporary_dir_says_to_point_tmpdir_elsewhere(cli, home, tmp_path):
    from tests.test_disk import Tmpfs

    fs = Tmpfs(tmp_path / "small").mount(size="1m")
    try:
        result = cli("demo", env=dict(os.environ, TMPDIR=str(fs.path)), timeout=300)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 5, result.stdout[-2000:] + result.stderr  # ExitCode.FILESYSTEM
        assert len(lines) == 1 and lines[0].startswith("prefetch: error: "), result.stderr
        assert "TMPDIR" in lines[0] and str(fs.path) in lines[0], lines
        assert "--cache-dir" not in result.stdout + result.stderr  # demo has no such option
        assert list(fs.path.iterdir()) == []
    finally:
        fs.unmount()


def test_doctor_names_a_pip_config_pip_cannot_load_instead_of_saying_install_pip(home, monkeypatch):
    import json

    from conftest import run_cli
    from mirror_helpers import isolate_tool_env

    env = isolate_tool_env(monkeypatch, home)
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text("[global\nindex-url = https://example.invalid/simple\n")  # a lost ']'
    done = run_cli("doctor", "--json", "--no-sources", env=env)
    data = json.loads(done.stdout)
    pip = [c for c in data["checks"] if c["topic"] == "pip"]
    assert len(pip) == 1, pip
    assert str(conf) in pip[0]["message"] and "could not be loaded" in pip[0]["message"], pip
    assert "ensurepip" not in pip[0]["hint"] and str(conf) in pip[0]["hint"], pip


def test_hf_endpoint_without_a_scheme_is_named_by_get_and_doctor(cli, home):
    import json

    env = dict(os.environ, HF_ENDPOINT="hf-mirror.com", HF_HOME=str(home / "hf"))
    got = cli("get", "hf://gpt2", env=env)
    lines = got.stderr.strip().splitlines()
    assert got.returncode == 2 and len(lines) == 1, got.stderr
    assert "HF_ENDPOINT=hf-mirror.com" in lines[0] and "https://hf-mirror.com" in lines[0], lines
    assert not (home / "hf").exists()

    doctor = cli("doctor", "--json", "--no-sources", env=env)
    hf = [c for c in json.loads(doctor.stdout)["checks"] if c["topic"] == "hf" and c["level"] != "info"]
    assert len(hf) == 1 and "HF_ENDPOINT=hf-mirror.com" in hf[0]["message"], hf
    assert "https://hf-mirror.com" in hf[0]["hint"], hf


def test_a_mistyped_command_gets_the_close_one_named_as_subcommands_do(cli, home):
    for typed, meant in (("demoo", "demo"), ("doctr", "doctor"), ("stauts", "status"), ("mirorr", "mirror")):
        done = cli(typed)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert f"No such command '{typed}'" in lines[0] and f"'{meant}'" in lines[0], lines
    sub = cli("mirror", "usee", "fastest")  # (click's own suggestion, for a group it holds)
    assert sub.returncode == 2 and "'use'" in sub.stderr, sub.stderr


def test_ctrl_c_during_the_demo_ends_it_instead_of_being_taken_for_its_own_interruption(home, tmp_path):
    # The engine takes a KeyboardInterrupt as "stop this run, resumable"; the demo's first step
    # is such a stop anyway, and the demo went on to steps 2 and 3 and said "demo ok", exit 0.
    import signal
    import subprocess

    from tests.helpers import start_cli

    proc = start_cli("demo", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        seen = []
        for line in proc.stdout:  # the first step's archive is on its way
            seen.append(line)
            if "demo-batches-py.tar.gz start" in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    out = "".join(seen) + out
    assert proc.returncode == 7, out[-2000:] + err  # ExitCode.INTERRUPTED
    assert "demo ok" not in out and "== 3." not in out, out
    assert err.strip().splitlines() == ["prefetch: error: interrupted; run the same command again to resume"] or \
        "interrupted" in err, err
    assert not list(tmp_path.glob("prefetch-demo-*")), "the temporary cache is deleted"


def test_doctor_says_uv_fails_on_a_uv_toml_it_cannot_parse_not_that_uv_uses_its_default(home, monkeypatch):
    # uv itself: "error: Failed to parse: ~/.config/uv/uv.toml", for every command.
    import json

    from conftest import run_cli
    from mirror_helpers import isolate_tool_env

    env = isolate_tool_env(monkeypatch, home)
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_NO_CONFIG", "UV_CONFIG_FILE"):
        env.pop(var, None)
    conf = home / ".config" / "uv" / "uv.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text('index-url = "https://example.invalid/simple\n')  # a lost '"'
    done = run_cli("doctor", "--json", "--no-sources", env=env, cwd=home)
    uv = [c for c in json.loads(done.stdout)["checks"] if c["topic"] == "uv"]
    assert not any("uv default" in c["message"] for c in uv), uv
    bad = [c for c in uv if c["level"] != "info"]
    assert len(bad) == 1 and str(conf) in bad[0]["message"] and "cannot parse" in bad[0]["message"], uv
    assert str(conf) in bad[0]["hint"], uv


def test_doctor_on_a_pip_conf_that_is_not_utf8_or_is_a_directory_says_what_pip_does(home, monkeypatch):
    import json

    from conftest import run_cli
    from mirror_helpers import isolate_tool_env

    env = isolate_tool_env(monkeypatch, home)
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_bytes(b"\xff\xfe[global]\nindex-url = https://example.invalid/simple\n")  # pip refuses it
    done = run_cli("doctor", "--json", "--no-sources", env=env)
    pip = [c for c in json.loads(done.stdout)["checks"] if c["topic"] == "pip"]
    assert len(pip) == 1 and str(conf) in pip[0]["message"] and "UTF-8" in pip[0]["message"], pip
    assert "ensurepip" not in pip[0]["hint"] and str(conf) in pip[0]["hint"], pip

    conf.unlink()
    conf.mkdir()  # pip skips a directory there: its default index, no error
    done = run_cli("doctor", "--json", "--no-sources", env=env)
    pip = [c for c in json.loads(done.stdout)["checks"] if c["topic"] == "pip" and c["level"] != "info"]
    assert len(pip) == 1 and "directory" in pip[0]["message"], pip
    assert "permissions" not in pip[0]["hint"] and "fail" not in pip[0]["hint"], pip


def test_a_proxy_variable_with_a_space_in_its_host_is_one_line_before_any_download(cli, home, tmp_path):
    # A copy-paste slip: `export http_proxy="http://proxy host:3128"`. requests refuses every
    # request through it ("URL can't contain control characters"); get retried for 18 s, exit 3.
    env = {k: v for k, v in os.environ.items() if k not in _PROXY_VARS}
    env["http_proxy"] = "http://proxy host:3128"
    out = tmp_path / "out"
    out.mkdir()
    done = cli("get", "http://127.0.0.1:9/x.bin", "-o", str(out / "x.bin"), env=env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "http_proxy" in lines[0] and "space" in lines[0], lines
    assert not list(out.iterdir())

    import json

    doctor = cli("doctor", "--json", "--no-sources", "--deadline", "2", env=env)
    fails = [c for c in json.loads(doctor.stdout)["checks"] if c["topic"] == "proxy" and c["level"] == "fail"]
    assert len(fails) == 1 and "http_proxy is not a valid proxy URL" in fails[0]["message"], fails


def test_doctor_does_not_pass_a_socks_proxy_that_get_refuses(cli, home):
    # Clash and v2ray export all_proxy=socks5://127.0.0.1:7890; get refuses a socks proxy
    # ("not supported: use an http:// proxy"), so a listening one must not be doctor's [ok].
    import json
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in _PROXY_VARS}
        env["all_proxy"] = f"socks5://127.0.0.1:{port}"
        doctor = cli("doctor", "--json", "--no-sources", "--deadline", "2", env=env)
    proxy = [c for c in json.loads(doctor.stdout)["checks"] if c["topic"] == "proxy" and c["level"] != "info"]
    assert [c["level"] for c in proxy] == ["fail"], proxy
    assert "socks5" in proxy[0]["message"] and "http://" in proxy[0]["hint"], proxy


def test_demo_in_a_non_ascii_temporary_dir_with_an_ascii_stdout(cli, home, tmp_path):
    # PYTHONIOENCODING=ascii (or a locale whose charset lacks the path's letters): the demo's
    # progress lines failed to encode inside the download's event callback, so the *files*
    # failed ("internal error: UnicodeEncodeError"), .part left behind, "demo FAILED".
    tmp = tmp_path / "données ünï"
    tmp.mkdir()
    done = cli("demo", env=dict(os.environ, PYTHONIOENCODING="ascii", TMPDIR=str(tmp)), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "demo ok: every file verified and in place" in done.stdout
    assert "internal error" not in done.stdout + done.stderr


def test_get_with_stderr_closed_still_downloads_and_places_the_file(home, origin, tmp_path):
    # `prefetch get URL -o F 2>&-` (a launcher that closes stderr): sys.stderr is None, the
    # progress renderer wrote to None inside the download's event callback, so the download
    # failed (exit 1, a .part left) and said nothing, having nowhere to say it.
    import subprocess
    import sys

    data = os.urandom(300_000)
    origin.put("f.bin", data)
    out = tmp_path / "out" / "f.bin"
    result = subprocess.run(["bash", "-c", f'exec {sys.executable} -m prefetch get "$0" -o "$1" 2>&-',
                             origin.url_for("f.bin"), str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout
    assert out.read_bytes() == data
