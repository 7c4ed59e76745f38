"""The mirror catalog: built-in entries, user overrides, dataset mirrors, schema errors."""

from __future__ import annotations

import json
import re

import pytest
from conftest import run_cli
from mirror_helpers import write_user_mirrors

from prefetch.errors import MirrorCatalogError
from prefetch.mirrors.catalog import BUILTIN, load_catalog, resolve_dataset_mirror

ANSI = re.compile(r"\x1b\[")


def test_builtin_catalog_has_the_design_mirrors():
    catalog = load_catalog()
    expected = {
        "tuna": "https://pypi.tuna.tsinghua.edu.cn/simple",
        "bfsu": "https://mirrors.bfsu.edu.cn/pypi/web/simple",
        "aliyun": "https://mirrors.aliyun.com/pypi/simple/",
        "ustc": "https://mirrors.ustc.edu.cn/pypi/simple",
        "tencent": "https://mirrors.cloud.tencent.com/pypi/simple",
        "huawei": "https://mirrors.huaweicloud.com/repository/pypi/simple",
        "sjtu": "https://mirror.sjtu.edu.cn/pypi/web/simple",
        "nju": "https://mirror.nju.edu.cn/pypi/web/simple",
        "pypi": "https://pypi.org/simple",
    }
    assert {name: catalog.get(name).pypi for name in expected} == expected
    assert catalog.get("tuna").conda == "https://mirrors.tuna.tsinghua.edu.cn/anaconda"
    assert catalog.get("ustc").conda is None  # its anaconda tree is a cloud-only cache
    internal = catalog.get("aliyun-internal")
    assert internal.pypi.startswith("http://") and internal.trusted_host == "mirrors.cloud.aliyuncs.com"
    assert all(m.trusted_host is None for m in catalog.mirrors.values() if m.pypi and m.pypi.startswith("https"))
    assert catalog.get("hf-mirror").hf == "https://hf-mirror.com" and catalog.get("hf-mirror").tools == ["hf"]
    assert catalog.get("TUNA").name == "tuna"


def test_unknown_mirror_suggests_close_names():
    with pytest.raises(MirrorCatalogError, match="did you mean tuna"):
        load_catalog().get("tunaa")


def test_user_file_adds_and_overrides(home, tmp_path):
    write_user_mirrors(
        home,
        '[mirrors.tuna]\npypi = "https://tuna.example/simple"\n'
        '[mirrors.corp]\npypi = "http://10.0.0.1:8080/simple"\nprobe = "../files/x.whl"\n'
        '[datasets.team]\nurl = "http://10.0.0.5/keras-datasets"\n',
    )
    from prefetch.fs.paths import config_dir

    catalog = load_catalog(config_dir=config_dir())
    assert catalog.get("tuna").pypi == "https://tuna.example/simple"
    assert catalog.get("tuna").conda is None  # a user entry replaces the built-in one as a whole
    assert catalog.get("tuna").source.endswith("mirrors.toml") and catalog.get("tuna").source != "built-in"
    corp = catalog.get("corp")
    assert corp.trusted_host == "10.0.0.1"
    assert corp.probe == "http://10.0.0.1:8080/files/x.whl"
    assert resolve_dataset_mirror("team", config_dir=config_dir()) == "http://10.0.0.5/keras-datasets/"


def test_resolve_dataset_mirror_urls_and_errors(tmp_path):
    assert resolve_dataset_mirror("https://h.example/d", config_dir=tmp_path) == "https://h.example/d/"
    assert resolve_dataset_mirror("http://127.0.0.1:8000/x/", config_dir=tmp_path) == "http://127.0.0.1:8000/x/"
    with pytest.raises(MirrorCatalogError, match="not an http:// or https:// URL"):
        resolve_dataset_mirror("ftp://h.example/d", config_dir=tmp_path)
    (tmp_path / "mirrors.toml").write_text('[datasets.team]\nurl = "http://10.0.0.5/d/"\n')
    with pytest.raises(MirrorCatalogError, match="did you mean team"):
        resolve_dataset_mirror("teem", config_dir=tmp_path)


@pytest.mark.parametrize(
    "text, line, needle",
    [
        ('[mirrors.x]\ntitle = "a"\npypi = \n', ":3:", "not valid TOML"),
        ('[mirrors.x]\ntitle = "a"\npypi = "ftp://nowhere"\n', ":3:", "pypi must be an http:// or https:// URL"),
        ('# c\n[mirrors.x]\npypi = "https://a.example/simple"\nindex = "x"\n', ":4:", "unknown key 'index'"),
        ('[mirrors.x]\ntitle = "only a title"\n', ":1:", "needs at least one of pypi, conda, hf"),
        ('[datasets.d]\ntitle = "no url"\n', ":1:", "needs url"),
        ('[mirrors.s]\npypi = "https://s.example/simple"\ntrusted_host = "s.example"\n', ":3:", "only for http://"),
    ],
)
def test_malformed_user_catalog_is_one_line_with_file_place_problem_and_exit_2(home, text, line, needle):
    path = write_user_mirrors(home, text)
    done = run_cli("mirror", "list")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"prefetch: error: {path}{line}")
    assert needle in lines[0]


def test_builtin_file_is_valid_and_shipped_beside_the_package():
    assert BUILTIN.name == "mirrors.toml" and BUILTIN.is_file()
    assert "[mirrors.tuna]" in BUILTIN.read_text()


def test_list_json_and_plain_output_without_ansi(home):
    write_user_mirrors(home, '[mirrors.mine]\npypi = "https://mine.example/simple"\n'
                             '[datasets.team]\nurl = "https://d.example/k/"\n')
    done = run_cli("mirror", "list", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    names = [m["name"] for m in data["mirrors"]]
    assert "tuna" in names and "mine" in names
    assert data["datasets"][0]["url"] == "https://d.example/k/"
    plain = run_cli("mirror", "list")
    assert plain.returncode == 0
    assert "mine" in plain.stdout and "https://pypi.tuna.tsinghua.edu.cn/simple" in plain.stdout
    assert "Dataset mirrors" in plain.stdout
    assert not ANSI.search(plain.stdout)
