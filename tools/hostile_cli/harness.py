"""Runs hostile cases against ``python -m prefetch`` and flags what breaks the promise.

Each case runs in a fresh HOME (PREFETCH_HOME, KERAS_HOME, XDG_* under it), cwd there, with
fast-failure network settings. Flagged: a traceback, an internal error, more than one error
line on stderr (timestamped progress notes aside), an exit code outside 0-7, a run past
LIMIT seconds or a timeout, a password (``s3cr3t``) printed back, an unexpected exit code.
See ``run.py`` for the case sets.
"""
from __future__ import annotations
import json, os, re, shutil, subprocess, sys, tempfile, time, hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.origin import OriginServer  # noqa: E402

PY = sys.executable
DATA = os.urandom(50_000)
SHA = hashlib.sha256(DATA).hexdigest()
LIMIT = 6.0

def base_env(home):
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith(("PREFETCH_", "HF_", "PIP_", "UV_"))}
    env.update(HOME=home, XDG_CONFIG_HOME=home + "/.config", XDG_STATE_HOME=home + "/.local/state",
               XDG_CACHE_HOME=home + "/.cache",
               KERAS_HOME=home + "/.keras", PREFETCH_HOME=home + "/.prefetch", TORCH_HOME=home + "/.torch",
               NO_PROXY="127.0.0.1,localhost,::1", PREFETCH_BACKOFF="0.05", PREFETCH_BACKOFF_CAP="0.2",
               PREFETCH_RETRY_AFTER_CAP="1", PREFETCH_READ_TIMEOUT="2", PREFETCH_CONNECT_TIMEOUT="2",
               PREFETCH_RETRIES="1", PREFETCH_TIMEOUT="3", LANG="C.UTF-8")
    env.pop("LC_ALL", None)
    return env

def run_case(case):
    home = tempfile.mkdtemp(prefix="prefetch-hostile-")
    try:
        env = base_env(home)
        for k, v in case.get("env", {}).items():
            if v is None: env.pop(k, None)
            else: env[k] = v.replace("{HOME}", home) if isinstance(v, str) else v
        argv = [a.replace("{HOME}", home) if isinstance(a, str) else a.replace(b"{HOME}", os.fsencode(home))
                for a in case["argv"]]
        for name, body in case.get("files", {}).items():
            p = os.path.join(home, name); os.makedirs(os.path.dirname(p), exist_ok=True)
            if body == "DIR": os.makedirs(p, exist_ok=True)
            elif body == "FIFO": os.mkfifo(p)
            elif isinstance(body, tuple) and body[0] == "LINK": os.symlink(body[1].replace("{HOME}", home), p)
            else:
                with open(p, "wb") as f: f.write(body if isinstance(body, bytes) else body.encode())
        cmd = [PY, "-m", "prefetch", *argv]
        stdin = case.get("stdin", "devnull"); stdout = case.get("stdout", "pipe")
        if stdout == "closed" or stdin == "closed":
            shell = 'exec "$@"' + (' >&-' if stdout == "closed" else '') + (' <&-' if stdin == "closed" else '')
            cmd = ["sh", "-c", shell, "sh", *cmd]
        kw = {}
        if isinstance(stdin, bytes): kw["input"] = stdin
        elif stdin == "devnull": kw["stdin"] = subprocess.DEVNULL
        out_f = None
        if stdout == "full": out_f = open("/dev/full", "wb"); kw["stdout"] = out_f
        elif stdout == "closed": kw["stdout"] = subprocess.DEVNULL  # replaced by >&-
        else: kw["stdout"] = subprocess.PIPE
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, stderr=subprocess.PIPE, env=env, cwd=home, timeout=case.get("timeout", 20), **kw)
            rc, out, err = p.returncode, p.stdout or b"", p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "TIMEOUT", e.stdout or b"", e.stderr or b""
        dt = time.monotonic() - t0
        if out_f: out_f.close()
        return dict(case, rc=rc, out=out.decode("utf-8", "replace"), err=err.decode("utf-8", "replace"), dt=dt)
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", home], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)

def judge(r):
    flags = []
    rc, err, out = r["rc"], r["err"], r["out"]
    if r.get("expect") == "TIMEOUT":  # waits by design (-i on a FIFO with no writer, as cat does)
        return [] if rc == "TIMEOUT" else [f"expected a wait, got rc={rc}"]
    if r["argv"][:1] in (["doctor"], ["list"]) and rc == 1 and not err.strip() and out.strip():
        return []  # a report on stdout, exit 1 as documented: a check failed / a named package not complete
    if rc == "TIMEOUT": flags.append("timeout")
    elif not (0 <= rc <= 7): flags.append(f"rc={rc}")
    if "Traceback" in err or "Traceback" in out: flags.append("traceback")
    if "internal error" in err: flags.append("internal")
    lines = [l for l in err.splitlines() if l.strip()]
    if rc not in (0, "TIMEOUT") and r.get("stdout") != "full" and not r.get("multi_ok"):
        lines = [l for l in lines if not re.match(r"\d{4}-\d\d-\d\dT", l)]
        if len(lines) != 1 and not (rc == 2 and not lines and "Usage" in out):
            flags.append(f"stderr_lines={len(lines)}")
    if r["dt"] > r.get("limit", LIMIT): flags.append(f"slow={r['dt']:.1f}")
    if "s3cr3t" in err or "s3cr3t" in out: flags.append("secret-leak")
    exp = r.get("expect")
    if exp is not None and rc not in (exp if isinstance(exp, tuple) else (exp,)): flags.append(f"expected {exp}")
    return flags

def main(cases, workers=2, out="hostile-results.jsonl", show_all=False):
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(run_case, cases))
    bad = 0
    with open(out, "w") as f:
        for r in results:
            r["flags"] = judge(r)
            f.write(json.dumps({k: (repr(v) if isinstance(v, (bytes, list, dict)) else v) for k, v in r.items() if k != "files"}) + "\n")
            if r["flags"] or show_all:
                bad += bool(r["flags"])
                print(f"== {r['id']} rc={r['rc']} dt={r['dt']:.1f} flags={r['flags']}")
                print("   err:", r["err"][-600:].replace("\n", "\n        "))
                if r["out"].strip(): print("   out:", r["out"][:300].replace("\n", "\n        "))
    print(f"{len(results)} cases, {bad} flagged")
    return results
