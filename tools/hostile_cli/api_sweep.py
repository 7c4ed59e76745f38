"""Each public API entry called with hostile values, a fresh child per call (HOME isolated):
prints every call that ended in anything but a result or a PrefetchError, or showed a password."""
import json, os, subprocess, sys, tempfile, itertools
PY = sys.executable
VALUES = {"None": "None", "int": "5", "neg": "-1", "float": "1.5", "nan": "float('nan')", "inf": "float('inf')",
          "bool": "True", "empty": "''", "space": "' '", "list_empty": "[]", "dict": "{'a': 1}", "bytes": "b'x'",
          "nul": "'a\\x00b'", "long": "'a'*100000", "obj": "object()", "path": "__import__('pathlib').Path('/tmp/x')",
          "tilde": "'~nosuchuser/x'", "gen": "(x for x in ['mnist'])", "set": "{'mnist'}", "surrogate": "'\\udcff'",
          "url_pw": "'http://u:s3cr3t@127.0.0.1:9/x.bin'", "zw": "'mnist\\u200b'", "cr": "'mnist\\r'"}
CALLS = {
 "ensure(V)": "prefetch.ensure({v})", "ensure(names, connections=V)": "prefetch.ensure('http://127.0.0.1:9/x.bin', connections={v})",
 "ensure(names, mirror=V)": "prefetch.ensure('mnist', mirror={v})", "ensure(names, cache_dir=V)": "prefetch.ensure('mnist', cache_dir={v})",
 "ensure(names, limit_rate=V)": "prefetch.ensure('http://127.0.0.1:9/x.bin', limit_rate={v})",
 "ensure(names, timeout=V)": "prefetch.ensure('http://127.0.0.1:9/x.bin', timeout={v})",
 "ensure(names, headers=V)": "prefetch.ensure('http://127.0.0.1:9/x.bin', headers={v})",
 "ensure(names, on_event=V)": "prefetch.ensure('http://127.0.0.1:9/x.bin', on_event={v})",
 "fetch(V)": "prefetch.fetch({v})", "fetch(url, sha256=V)": "prefetch.fetch('http://127.0.0.1:9/x.bin', sha256={v})",
 "fetch(url, path=V)": "prefetch.fetch('http://127.0.0.1:9/x.bin', path={v})",
 "fetch(url, fname=V)": "prefetch.fetch('http://127.0.0.1:9/x.bin', fname={v})",
 "fetch(url, connections=V)": "prefetch.fetch('http://127.0.0.1:9/x.bin', connections={v})",
 "get_file(V, origin)": "prefetch.get_file({v}, origin='http://127.0.0.1:9/x.bin')",
 "get_file(fname, origin=V)": "prefetch.get_file('x.bin', origin={v})",
 "get_file(fname, origin, file_hash=V)": "prefetch.get_file('x.bin', origin='http://127.0.0.1:9/x.bin', file_hash={v})",
 "get_file(fname, origin, cache_dir=V)": "prefetch.get_file('x.bin', origin='http://127.0.0.1:9/x.bin', cache_dir={v})",
 "wait(V)": "prefetch.wait({v})", "wait(None, timeout=V)": "prefetch.wait('mnist', timeout={v})",
 "status(V)": "prefetch.status({v})", "watch(V)": "prefetch.watch({v}, timeout=0.5)",
 "watch(None, interval=V)": "prefetch.watch(None, interval={v}, timeout=0.5)",
 "watch(None, timeout=V)": "prefetch.watch(None, timeout={v})",
 "remove(V)": "prefetch.remove({v}, dry_run=True)", "clean(older_than=V)": "prefetch.clean(older_than={v}, dry_run=True)",
 "cache_usage(cache_dir=V)": "prefetch.cache_usage(cache_dir={v})",
 "as_completed(V)": "list(prefetch.as_completed({v}))", "as_completed(names, max_ahead=V)": "list(prefetch.as_completed(['http://127.0.0.1:9/x.bin'], max_ahead={v}))",
 "as_completed(names, order=V)": "list(prefetch.as_completed(['http://127.0.0.1:9/x.bin'], order={v}))",
}
CHILD = r'''
import os, sys, json, signal
signal.alarm(8)
os.environ["PREFETCH_RETRIES"]="0"; os.environ["PREFETCH_CONNECT_TIMEOUT"]="1"
import prefetch
from prefetch.errors import PrefetchError
try:
    r = {expr}
    print(json.dumps({{"ok": repr(r)[:200]}}))
except PrefetchError as e:
    print(json.dumps({{"prefetch": type(e).__name__, "msg": str(e)[:300]}}))
except Exception as e:
    import traceback
    print(json.dumps({{"other": type(e).__name__, "msg": str(e)[:300], "tb": traceback.format_exc()[-600:]}}))
'''
def one(item):
    (cname, tmpl), (vname, v) = item
    home = tempfile.mkdtemp(prefix="prefetch-api-hostile-")
    env = dict(os.environ, HOME=home, PREFETCH_HOME=home+"/.p", KERAS_HOME=home+"/.k", XDG_CONFIG_HOME=home+"/.c", XDG_STATE_HOME=home+"/.s", NO_PROXY="*")
    try:
        p = subprocess.run([PY, "-c", CHILD.format(expr=tmpl.format(v=v))], capture_output=True, text=True, timeout=15, env=env, cwd=home)
        out = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else json.dumps({"rc": p.returncode, "err": p.stderr[-300:]})
    except subprocess.TimeoutExpired:
        out = json.dumps({"timeout": True})
    finally:
        import shutil
        shutil.rmtree(home, ignore_errors=True)
    return cname, vname, json.loads(out)
def main():
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    items = list(itertools.product(CALLS.items(), VALUES.items()))
    with ThreadPoolExecutor(2) as ex:
        res = list(ex.map(one, items))
    for c, v, r in res:
        if "prefetch" in r and "s3cr3t" not in r["msg"] or "ok" in r:
            continue
        print(c, v, json.dumps(r)[:400])
    print(f"{len(res)} calls")
