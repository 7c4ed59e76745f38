"""``torch_dataset`` under DistributedDataParallel: a real ``torchrun --nproc_per_node=2`` (gloo on
127.0.0.1), each rank with DataLoader workers, against nginx (tests/nginx.py). Each rank sends its
own ``X-Client`` header, so the server's log says which rank fetched which shard."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.nginx import NginxServer

pytest.importorskip("torch.distributed")

KiB = 1 << 10
SIZE = 384 * KiB  # more than the sockets' buffers: a shard takes ~0.4 s at nginx's 1 MiB/s
SCRIPT = Path(__file__).with_name("shard15_ddp_train.py")
NAMES = [f"shard-{i:02d}.tar" for i in range(9)]  # 9: the ranks' shares differ by one


@pytest.fixture
def shards(tmp_path):
    root = tmp_path / "nginx-root"
    root.mkdir()
    blobs = {n: os.urandom(SIZE) for n in NAMES}
    for name, data in blobs.items():
        (root / name).write_bytes(data)
    with NginxServer(root, limit_rate="1m") as server:  # the ranks overlap
        server.urls = [server.url_for(n) + "#sha256=" + hashlib.sha256(blobs[n]).hexdigest() for n in NAMES]
        server.blobs = blobs
        yield server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun(tmp_path: Path, *, terminal: bool = False, **config) -> list[dict]:
    """Run the training script on 2 ranks; what each rank was handed, per epoch. ``terminal``: on
    a pseudo-terminal (``script``), whose output is then the ``output`` of the first rank's entry."""
    cfg, result = tmp_path / "ddp.json", tmp_path / "ddp-result.json"
    cfg.write_text(json.dumps(config))
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    env.pop("PREFETCH_PLAIN", None)
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={_free_port()}", str(SCRIPT), str(cfg), str(result)]
    if terminal:
        # (the pseudo-terminal has 0 columns unless told: tqdm would draw empty bars)
        command = ["script", "-qec", "stty cols 200 rows 40; " + shlex.join(command), "/dev/null"]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = sorted(json.loads(result.read_text()), key=lambda r: r["rank"])
    ranks[0]["output"] = proc.stdout + proc.stderr
    return ranks


def fetched(server) -> dict[str, Counter]:
    """rank label -> how many body bytes of each shard nginx sent it."""
    out: dict[str, Counter] = {}
    for client, status, body, request in server.clients():
        if request.split()[0] == "GET" and status in (200, 206):
            out.setdefault(client, Counter())[request.split()[1].lstrip("/")] += body
    return out


@pytest.mark.parametrize("workers,start,forget_env,persistent", [
    (2, "fork", False, False), (0, None, False, False), (2, "spawn", True, False), (2, "fork", True, False),
    (2, "spawn", True, True)])
def test_each_rank_reads_and_downloads_only_its_share_and_the_union_is_every_shard_once(
        shards, home, tmp_path, workers, start, forget_env, persistent):
    out = tmp_path / "out"
    ranks = torchrun(tmp_path, urls=shards.urls, out=str(out), by_rank=True, workers=workers, start=start,
                     epochs=2, max_ahead=1, forget_env=forget_env, persistent=persistent)
    assert [r["world"] for r in ranks] == [2, 2]
    share = {r: set(NAMES[r::2]) for r in (0, 1)}  # names r, r+2, ...: the rank's share
    for r in ranks:
        first, second = r["epochs"]
        assert Counter(first) == Counter(share[r["rank"]]), (r["rank"], first)  # its share, each once
        assert Counter(second) == Counter(first)  # the next epoch: the same, from the cache
        assert f"rank {r['rank']}'s share of 2" in r["repr"]
    everything = [n for r in ranks for n in r["epochs"][0]]
    assert Counter(everything) == Counter(NAMES)  # every shard read once in the epoch, by one rank
    got = fetched(shards)
    assert set(got) == {"rank0", "rank1"}, got
    for r in (0, 1):  # from the server's side: a rank downloaded its own share, nothing else, once
        assert got[f"rank{r}"] == Counter({n: SIZE for n in share[r]}), (r, got[f"rank{r}"])
    assert all((out / n).read_bytes() == shards.blobs[n] for n in NAMES)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_rank_that_leaves_early_downloaded_only_its_own_shards_and_its_look_ahead(shards, home, tmp_path, workers):
    ranks = torchrun(tmp_path, urls=shards.urls, out=str(tmp_path / "out"), by_rank=True, workers=workers,
                     start="fork", epochs=1, max_ahead=1, take=1)
    got = fetched(shards)
    for r in ranks:
        assert len(r["epochs"][0]) == 1 and r["epochs"][0][0] in NAMES[r["rank"]::2], r
        mine = got.get(f"rank{r['rank']}", Counter())
        assert set(mine) <= set(NAMES[r["rank"]::2]), (r["rank"], mine)  # never another rank's shard
        if not workers:  # the one taken, and max_ahead=1 beyond it (with workers, the loader's own
            assert len(mine) <= 2, (r["rank"], mine)  # prefetching takes items ahead too: no fixed bound)


def test_by_rank_false_every_rank_reads_everything_and_one_cache_downloads_each_shard_once(
        shards, home, tmp_path):
    out = tmp_path / "out"
    ranks = torchrun(tmp_path, urls=shards.urls, out=str(out), by_rank=False, workers=2, start="fork", epochs=1)
    for r in ranks:
        assert Counter(r["epochs"][0]) == Counter(NAMES), r  # every rank: every shard, once
        assert "share" not in r["repr"]
    sent = Counter()
    for counts in fetched(shards).values():
        sent.update(counts)
    # Both ranks (4 worker processes) wanted every shard at once in one output_dir: the file
    # locks let one download it while the other waited and found it in place.
    assert sent == Counter({n: SIZE for n in NAMES}), sent
    assert all((out / n).read_bytes() == shards.blobs[n] for n in NAMES)


def test_the_rank_comes_from_rank_and_world_size_without_a_process_group(monkeypatch, tmp_path):
    import prefetch
    from prefetch.errors import UsageError

    names = [f"http://127.0.0.1:9/{n}" for n in NAMES]
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    dataset = prefetch.torch_dataset(names, output_dir=str(tmp_path))
    assert dataset.shard() == (names[1::3], [])
    assert "rank 1's share of 3" in repr(dataset)
    entries = [{"url": f"http://127.0.0.1:9/u{i}.tar"} for i in range(3)]  # urls= entries: dealt after the names
    mixed = prefetch.torch_dataset(names[:2], urls=entries, output_dir=str(tmp_path))
    assert mixed.shard() == ([names[1]], [entries[2]])  # items n0 n1 u0 u1 u2: rank 1 of 3 gets n1, u2
    assert prefetch.torch_dataset(names, output_dir=str(tmp_path), by_rank=False).shard() == (names, [])
    two = prefetch.torch_dataset(names[:2], output_dir=str(tmp_path))
    with pytest.raises(UsageError, match="2 name"):  # fewer names than ranks: rank 2 would have none
        two.shard()
    with pytest.raises(UsageError, match="2 name"):
        list(two)  # (iterating: every rank, not only the empty one, so none trains on alone)
    assert prefetch.torch_dataset(names[:2], output_dir=str(tmp_path), by_rank=False).shard() == (names[:2], [])
    made = prefetch.torch_dataset(names, output_dir=str(tmp_path))
    for rank, world in (("3", "3"), ("-1", "2"), ("one", "2"), ("0", "0")):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", world)
        with pytest.raises(UsageError, match="RANK="):
            prefetch.torch_dataset(names, output_dir=str(tmp_path))
        prefetch.torch_dataset(names, output_dir=str(tmp_path), by_rank=False)  # (not read at all)
        assert "share" not in repr(made)  # (RANK changed after it was made: its repr does not raise)
        with pytest.raises(UsageError, match="RANK="):
            made.shard()  # (iterating does)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert prefetch.torch_dataset(names, output_dir=str(tmp_path)).shard() == (names, [])
    with pytest.raises(UsageError, match="by_rank"):
        prefetch.torch_dataset(names, by_rank="no")


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a pseudo-terminal")
def test_on_a_terminal_only_rank_0_draws_a_progress_bar(shards, home, tmp_path):
    """Every rank writes to the one terminal (or notebook cell): a bar per rank garbled it."""
    ranks = torchrun(tmp_path, terminal=True, urls=shards.urls, out=str(tmp_path / "out"), by_rank=True, workers=0,
                     epochs=1, max_ahead=1, bars=True)
    output = ranks[0]["output"]
    assert "it/s" in output or "B/s" in output, output[-2000:]  # a bar was drawn: the terminal is one
    assert NAMES[0] in output, output[-2000:]  # rank 0's bar names its first shard
    assert not any(name in output for name in NAMES[1::2]), output[-2000:]  # rank 1 drew none


def test_a_copy_unpickled_in_another_process_looks_its_rank_up_afresh(tmp_path):
    """A spawned worker uses the rank its parent pickled; another process loading the same pickle
    (rank 1 loading what rank 0 saved) is not rank 0 for it."""
    saved = tmp_path / "dataset.pickle"
    save = f"""
import os, pickle, torch.distributed as dist, prefetch
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
names = [f"http://127.0.0.1:9/s{{i}}.tar" for i in range(4)]
ds = prefetch.torch_dataset(names, output_dir={str(tmp_path)!r})
open({str(saved)!r}, "wb").write(pickle.dumps(ds))
dist.destroy_process_group()
"""
    load = f"""
import pickle
ds = pickle.loads(open({str(saved)!r}, "rb").read())
print(ds.shard()[0])
"""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    for var in ("RANK", "WORLD_SIZE"):
        env.pop(var, None)
    subprocess.run([sys.executable, "-c", save], env=env, check=True, timeout=120, cwd=tmp_path)
    env.update(RANK="1", WORLD_SIZE="2")
    out = subprocess.run([sys.executable, "-c", load], env=env, check=True, timeout=120, cwd=tmp_path,
                         capture_output=True, text=True).stdout
    assert out.strip() == str([f"http://127.0.0.1:9/s{i}.tar" for i in (1, 3)]), out
