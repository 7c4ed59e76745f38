"""Every command and option of the click tree, fed hostile values (and URLs of every scheme)."""
import click



HOSTILE = {
 "empty": "", "space": " ", "tab": "\t", "nl": "\n", "cr": "x\r", "crlf_mnist": "mnist\r\n",
 "nbsp": "\u00a0mnist", "zw": "mnist\u200b", "smartq": "\u201cmnist\u201d", "rtl": "\u202emnist", "nonbmp": "\U0001F600",
 "long": "a" * 100_000, "undecodable": b"\xff\xfe\x80", "dash": "-", "ddash": "--", "neg": "-1", "zero": "0",
 "huge": "99999999999999999999999", "e400": "1e400", "nan": "nan", "inf": "inf", "ninf": "-inf", "float": "1.5",
 "dotdot": "../../../etc/passwd", "devzero": "/dev/zero", "root": "/", "tilde": "~nosuchuser/x", "fmt": "%s%n{0}",
 "uscore": "1_0", "ws_num": " 5 ",
}
URLS = {
 "ftp": "ftp://127.0.0.1/x", "file": "file:///etc/passwd", "data": "data:,hello", "js": "javascript:alert(1)",
 "s3": "s3://bucket/key.bin", "s3_nobucket": "s3://", "hf_empty": "hf://", "hf_one": "hf://a", "hf_at": "hf://a/b@",
 "hf_many": "hf://a/b/c/d/e@@x", "hf_dots": "hf://../..", "ms_empty": "ms://", "ms_one": "ms://x",
 "tv_unknown": "torchvision:Nope", "tv_empty": "torchvision:", "nltk_unknown": "nltk:nope", "nltk_empty": "nltk:",
 "keras_unknown": "keras:nope", "v6_nobr": "http://::1/x", "v6_unclosed": "http://[::1/x", "v6_port0": "http://[::1]:0/x",
 "port65536": "http://127.0.0.1:65536/x", "port_abc": "http://127.0.0.1:abc/x", "port0": "http://127.0.0.1:0/x",
 "userpass": "http://user:s3cr3t@127.0.0.1:1/x", "http_empty": "http://", "https_nohost": "https:///x",
 "space_host": "http://a b/x", "bare_scheme": "http:", "ctrl": "http://127.0.0.1/\x07x", "v6_zone": "http://[fe80::1%eth0]:1/x",
 "nbsp_url": "\u00a0http://127.0.0.1:1/x", "cr_url": "http://127.0.0.1:1/x\r", "zw_url": "http://127.0.0.1:1/x\u200b",
 "idn": "http://ex\u00e4mple.invalid/x", "huge_port": "http://127.0.0.1:99999999999999999999/x", "neg_port": "http://127.0.0.1:-1/x",
 "userpass_s3": "s3://AKIA:s3cr3t@bucket/x", "hf_userpass": "hf://user:s3cr3t@a/b",
}

def ctx_tree():
    from prefetch.cli import cli
    out = []
    def walk(cmd, path):
        ctx = click.Context(cmd)
        if isinstance(cmd, click.Group):
            for n in cmd.list_commands(ctx): walk(cmd.get_command(ctx, n), path + [n])
        else:
            out.append((path, cmd))
    walk(cli, [])
    return out

def make(commands=None):
    cases = []
    for path, cmd in ctx_tree():
        if commands and path[0] not in commands: continue
        if path == ["demo"]: continue
        pre = list(path)
        if path[:2] == ["mirror", "use"]: pre += ["--dry-run"]
        cases.append(dict(id=" ".join(path) + " --help", argv=pre + ["--help"], expect=0))
        for p in cmd.params:
            if isinstance(p, click.Argument):
                vals = dict(HOSTILE); 
                if p.name in ("names", "targets", "datasets"): vals.update(URLS)
                for k, v in vals.items():
                    argv = pre + (["--"] if isinstance(v, str) and v.startswith("-") and k not in ("dash", "ddash") else []) + [v]
                    if path == ["export"] and p.name == "names": argv = pre + ["{HOME}/exp", v]
                    cases.append(dict(id=f"{' '.join(path)} <{p.name}>={k}", argv=argv))
            elif not getattr(p, "is_flag", False) and p.name != "help":
                opt = p.opts[-1]
                vals = dict(HOSTILE)
                if p.name in ("mirrors", "seed", "lfs_from", "among"): vals.update(URLS)
                for k, v in vals.items():
                    tail = []
                    if path == ["get"]: tail = ["http://127.0.0.1:1/x.bin"] if p.name not in ("input_file",) else []
                    if path == ["export"]: tail = ["{HOME}/exp"]
                    if path[:2] == ["mirror", "restore"]: tail = ["--list"]
                    for form in ("sep", "eq"):
                        if form == "eq" and k not in ("empty", "nl", "undecodable", "long", "neg", "nan", "dash"): continue
                        if isinstance(v, bytes):
                            a = [opt.encode() + b"=" + v] if form == "eq" else [opt, v]
                        else:
                            a = [f"{opt}={v}"] if form == "eq" else [opt, v]
                        cases.append(dict(id=f"{' '.join(path)} {opt}{'=' if form=='eq' else ' '}{k}", argv=pre + a + tail))
    return cases
