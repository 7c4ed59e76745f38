"""Environment variables, closed or full streams, locales, argv bytes, -i lists and config files."""
from harness import SHA

GARBAGE = {"empty": "", "space": " ", "nan": "nan", "neg": "-5", "text": "abc", "huge": "9" * 40, "inf": "inf",
           "nl": "a\nb", "long": "x" * 100_000, "undecodable": b"\xff\xfe", "zw": "\u200b", "relpath": "relative/dir",
           "devnull": "/dev/null", "tilde": "~nosuchuser/x", "url": "http://user:s3cr3t@[::1", "zero": "0"}
VARS = ["PREFETCH_BACKOFF", "PREFETCH_BACKOFF_CAP", "PREFETCH_BULK", "PREFETCH_CAP_RETRY", "PREFETCH_CONNECT_TIMEOUT",
 "PREFETCH_DATASET_MIRROR", "PREFETCH_DEMOTE_WINDOW", "PREFETCH_FIRST_REQUEST", "PREFETCH_HOME", "PREFETCH_HOST_CONNECTIONS",
 "PREFETCH_LONG_ROUTE", "PREFETCH_LONG_ROUTE_CONNECTIONS", "PREFETCH_MAX_CONNECTIONS", "PREFETCH_MIN_SPLIT", "PREFETCH_NICE",
 "PREFETCH_NOTEBOOK", "PREFETCH_ONE_CONNECTION_RATE", "PREFETCH_PIECE_SIZE", "PREFETCH_PLAIN", "PREFETCH_PRECONNECT",
 "PREFETCH_READ_TIMEOUT", "PREFETCH_REQUEST_MAX", "PREFETCH_REQUEST_MIN", "PREFETCH_RESOLVE", "PREFETCH_RETRIES",
 "PREFETCH_RETRY_AFTER_CAP", "PREFETCH_REVIVE_AFTER", "PREFETCH_SEED_LEASE", "PREFETCH_SPLICE", "PREFETCH_STALL_MIN_RATE",
 "PREFETCH_STALL_WINDOW", "PREFETCH_SYNC", "PREFETCH_SYNC_EVERY", "PREFETCH_TIMEOUT", "PREFETCH_WORKER_DIR",
 "HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH", "HUGGINGFACE_HUB_CACHE", "TORCH_HOME",
 "MODELSCOPE_CACHE", "MODELSCOPE_DOMAIN", "MODELSCOPE_ENDPOINT", "NLTK_DATA", "KERAS_HOME", "XDG_CONFIG_HOME",
 "XDG_STATE_HOME", "XDG_CACHE_HOME", "HOME", "PIP_CONFIG_FILE", "PIP_INDEX_URL", "UV_CONFIG_FILE", "UV_INDEX_URL", "CONDARC",
 "http_proxy", "https_proxy", "ALL_PROXY", "NO_PROXY", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NETRC",
 "SSLKEYLOGFILE", "COLUMNS", "LINES", "TERM", "NO_COLOR", "FORCE_COLOR", "JPY_PARENT_PID", "AWS_ENDPOINT_URL", "AWS_REGION",
 "LANG", "LC_ALL", "PYTHONIOENCODING"]

def make(origin_url):
    cases = []
    url = origin_url + "d.bin"
    cmds = {"get": ["get", url, "-o", "{HOME}/out.bin", "--sha256", SHA], "status": ["status"], "list": ["list"],
            "doctor": ["doctor"], "mirror-show": ["mirror", "show"], "verify": ["verify", "{HOME}/nothing"]}
    for var in VARS:
        for k, v in GARBAGE.items():
            for cname in (("get", "status") if var.startswith("PREFETCH") or var in ("HOME", "LANG", "LC_ALL", "COLUMNS", "TERM", "PYTHONIOENCODING") else ("get", "mirror-show")):
                cases.append(dict(id=f"{var}={k} {cname}", argv=cmds[cname], env={var: v}))
    return cases

def make_streams(origin_url):
    url = origin_url + "d.bin"
    cases = []
    cmds = {"get": ["get", url, "-o", "{HOME}/out.bin", "--sha256", SHA], "get-json": ["get", url, "-o", "{HOME}/o2.bin", "--json"],
            "get-print": ["get", url, "-o", "{HOME}/o3.bin", "--print-paths"], "status": ["status", "--all"], "list": ["list"],
            "list-json": ["list", "--json"], "doctor": ["doctor"], "mirror-list": ["mirror", "list"], "help": ["--help"],
            "version": ["--version"], "get-help": ["get", "--help"], "verify": ["verify", "mnist"], "clean": ["clean", "-n"],
            "jobs-clean": ["jobs", "clean"], "mirror-show": ["mirror", "show"], "log": ["log"], "wait": ["wait"]}
    for name, argv in cmds.items():
        for so in ("closed", "full"):
            cases.append(dict(id=f"stdout={so} {name}", argv=argv, stdout=so, multi_ok=True))
        cases.append(dict(id=f"stdin=closed {name}", argv=argv, stdin="closed"))
        for env in ({"LANG": None, "LC_ALL": None}, {"LC_ALL": "xx_YY.UTF-8"}, {"LANG": "C"}, {"TERM": "dumb", "COLUMNS": "0"},
                    {"COLUMNS": "-5", "LINES": "abc"}, {"COLUMNS": "abc"}, {"COLUMNS": "1", "FORCE_COLOR": "1"}, {"NO_COLOR": "1", "PYTHONIOENCODING": "ascii"}):
            cases.append(dict(id=f"{env} {name}", argv=argv, env=env))
    # non-UTF-8 argv under various locales
    for env in ({"LANG": "C"}, {"LANG": "C.UTF-8"}, {"LC_ALL": "en_US.UTF-8"}, {"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "utf-8:strict"}):
        for argv in (["get", b"\xff\xfe"], ["list", b"torchvision:\xff"], ["get", url, "-o", b"{HOME}/\xff.bin"],
                     ["get", url, "-P", b"{HOME}/\xff", "--json"], ["get", url, "-P", b"{HOME}/\xfe", "--print-paths"],
                     ["verify", b"/tmp/\xff"], ["rm", b"\xff"], ["wait", b"\xff"], ["status", b"\xff"], ["get", "\U0001F600\u202e"]):
            cases.append(dict(id=f"{env} argv={argv}", argv=argv, env=env))
    return cases

def make_lists(origin_url):
    url = origin_url + "d.bin"
    L = {"dir": "DIR", "binary": bytes(range(256)) * 4, "utf16bom": ("\ufeff" + url + "\n").encode("utf-16"),
         "utf8bom": ("\ufeff" + url + "\n").encode(), "nul": (url + "\x00\n").encode(), "tabs": f"{url}\tsha256={SHA}\tout=t.bin\n",
         "aria2": f"{url}\n  out=a.bin\n  dir={'{HOME}'}/x\n  checksum=sha-256={SHA}\n", "crlf": f"{url}\r\n", "empty": b"",
         "comments": "# just a comment\n\n   \n", "huge_line": ("http://127.0.0.1:1/" + "a" * 2_000_000 + "\n"), "fifo": "FIFO",
         "badopt": f"{url} nosuch=1\n", "badsha": f"{url} sha256=zz\n", "outdotdot": f"{url} out=../../escape.bin\n",
         "outabs": f"{url} out=/etc/evil\n", "nbsp": f"\u00a0{url}\u00a0\n", "zw": f"{url}\u200b\n", "smart": f"\u201c{url}\u201d\n",
         "dupes": f"{url}\n{url}\n", "userpass": "http://u:s3cr3t@127.0.0.1:1/x\n", "latin1": ("\xe9" + url + "\n").encode("latin-1"),
         "loop": ("LINK", "{HOME}/loop"), "dangling": ("LINK", "{HOME}/nowhere"), "many_bad": "nonsense\n" * 3}
    cases = []
    for k, body in L.items():
        wait = dict(expect="TIMEOUT", timeout=3) if k == "fifo" else dict(timeout=15)
        cases.append(dict(id=f"-i {k}", argv=["get", "-i", "{HOME}/list.txt", "-P", "{HOME}/dl"], files={"list.txt": body}, **wait))
    cases.append(dict(id="-i /dev/zero", argv=["get", "-i", "/dev/zero"], timeout=15))
    cases.append(dict(id="-i /dev/null", argv=["get", "-i", "/dev/null"]))
    cases.append(dict(id="-i - nul stdin", argv=["get", "-i", "-", "-P", "{HOME}/dl"], stdin=(url + "\x00\n").encode()))
    cases.append(dict(id="-i - binary stdin", argv=["get", "-i", "-", "-P", "{HOME}/dl"], stdin=bytes(range(256))))
    cases.append(dict(id="-i - closed stdin", argv=["get", "-i", "-", "-P", "{HOME}/dl"], stdin="closed"))
    cases.append(dict(id="-i - devnull", argv=["get", "-i", "-", "-P", "{HOME}/dl"]))
    cases.append(dict(id="-i missing", argv=["get", "-i", "{HOME}/missing"]))
    cases.append(dict(id="-i unreadable", argv=["get", "-i", "/root/../proc/self/mem"]))
    # config files
    CONF = {"binary": bytes(range(256)), "dir": "DIR", "loop": ("LINK", "{HOME}/loop2"), "huge": b"[x]\n" + b"a = 1\n" * 500_000,
            "utf16": "[global]\nindex-url = http://x\n".encode("utf-16"), "nul": b"[global]\x00\nindex-url=\x00\n", "fifo": "FIFO",
            "bad": "[[[\n= =\n"}
    for k, body in CONF.items():
        for rel, argv in ((".config/prefetch/mirrors.toml", ["mirror", "list"]), (".config/prefetch/mirrors.toml", ["get", "mnist", "--mirror", "x"]),
                          (".config/pip/pip.conf", ["mirror", "show"]), (".condarc", ["mirror", "show"]), (".config/uv/uv.toml", ["mirror", "show"]),
                          (".config/pip/pip.conf", ["doctor"]), (".config/prefetch/registry.toml", ["list"]),
                          (".netrc", ["get", url, "-o", "{HOME}/n.bin"]), (".config/pip/pip.conf", ["mirror", "use", "--dry-run", "tuna"])):
            b = body
            if isinstance(body, tuple): b = ("LINK", "{HOME}/" + rel)
            cases.append(dict(id=f"conf {rel}={k} {' '.join(argv)}", argv=argv, files={rel: b}, timeout=15))
    return cases
