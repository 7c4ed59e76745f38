"""One object under two signings in ``torch_dataset``'s (or ``tf_generator``'s ``shard=``) names
is one item of the epoch, whatever the DataLoader workers and DDP ranks (real torch, real nginx
on 127.0.0.1 that serves a file whatever its ``?token=`` or signature).

A portal hands out a new presigned link (or ``?token=``) each session; a shard list built over two
sessions names one object twice. ``get`` makes the two one file with the other signing as a
second source (tests/test_review18_two_signings.py); the dataset dropped repeats by exact string,
so the two signings were two items, dealt to two workers (or ranks), and both yielded the one
file: the training saw its samples twice an epoch. Now the signings of one object are dealt as one
item (the others still its alternative sources); two signings with different hashes or names to
be saved under are refused when the dataset is made, never one of them picked silently.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter

import pytest

import prefetch
from prefetch.errors import UsageError
from tests import test_stream_review14_loader as loader
from tests.nginx import NginxServer

KiB = 1 << 10
SHARDS = ("a.bin", "b.bin", "c.bin")
unix_sockets = loader.unix_sockets  # (the fixture: torch's workers hand items over on Unix sockets)


@pytest.fixture
def nginx(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    for name in SHARDS:
        (root / name).write_bytes(os.urandom(4 * KiB))
    with NginxServer(root) as server:
        server.root = root
        yield server


def _signed(nginx, name: str, token: str) -> str:
    return f"{nginx.url_for(name)}?token={token}"


def _presigned(nginx, name: str, signature: str) -> str:
    return (f"{nginx.url_for(name)}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261128T000000Z"
            f"&X-Amz-Expires=300&X-Amz-Signature={signature}")


def _names(nginx) -> list[str]:
    # a.bin twice, by two tokens: dealt by string to 2 workers, worker 0 had a, c and worker 1 had b, a
    return [_signed(nginx, "a.bin", "one"), _signed(nginx, "b.bin", "one"), _signed(nginx, "c.bin", "one"),
            _signed(nginx, "a.bin", "two")]


def _epoch(dataset, workers: int) -> Counter:
    from torch.utils.data import DataLoader

    return Counter(os.path.basename(p) for p in DataLoader(dataset, batch_size=None, num_workers=workers))


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_two_signings_of_one_shard_are_one_item_of_each_epoch(nginx, home, tmp_path, unix_sockets,
                                                              workers):
    dataset = prefetch.torch_dataset(_names(nginx), output_dir=str(tmp_path / "out"), progress=False)
    assert _epoch(dataset, workers) == Counter(SHARDS)
    assert _epoch(dataset, workers) == Counter(SHARDS)  # the next epoch, from the files in place
    for name in SHARDS:
        assert (tmp_path / "out" / name).read_bytes() == (nginx.root / name).read_bytes()


def test_a_name_and_a_urls_entry_signed_otherwise_are_one_item(nginx, home, tmp_path, unix_sockets):
    """The second signing as a ``urls=`` entry (a presigned S3 link; its hash given there)."""
    data = (nginx.root / "b.bin").read_bytes()
    # dealt by string to 2 workers: worker 0 had a, c and b's entry; worker 1 had b and c's entry
    urls = [_presigned(nginx, "c.bin", "cccc"),
            {"url": _presigned(nginx, "b.bin", "bbbb"), "sha256": hashlib.sha256(data).hexdigest()}]
    dataset = prefetch.torch_dataset([_presigned(nginx, n, "aaaa") for n in SHARDS], urls=urls,
                                     output_dir=str(tmp_path / "out"), progress=False)
    assert _epoch(dataset, 2) == Counter(SHARDS)
    assert _epoch(dataset, 0) == Counter(SHARDS)


def test_ddp_ranks_share_an_object_of_two_signings_once(nginx, home, tmp_path, unix_sockets,
                                                        monkeypatch):
    """Two ranks of two workers each: the union of the ranks' epochs is every shard once."""
    seen: Counter = Counter()
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        dataset = prefetch.torch_dataset(_names(nginx), output_dir=str(tmp_path / "out"), progress=False)
        seen += _epoch(dataset, 2)
    assert seen == Counter(SHARDS)


def test_tf_generator_shards_deal_an_object_of_two_signings_once(nginx, home, tmp_path):
    seen: Counter = Counter()
    for index in (0, 1):
        generate = prefetch.tf_generator(_names(nginx), shard=(index, 2), output_dir=str(tmp_path / "out"),
                                         progress=False)
        seen += Counter(os.path.basename(p) for p in generate())
    assert seen == Counter(SHARDS)


@pytest.mark.parametrize("conflict", ["sha256", "out"])
def test_two_signings_that_disagree_are_refused_when_the_dataset_is_made(nginx, home, tmp_path, conflict):
    first, second = _signed(nginx, "a.bin", "one"), _signed(nginx, "a.bin", "two")
    if conflict == "sha256":
        urls = [{"url": first, "sha256": "1" * 64}, {"url": second, "sha256": "2" * 64}]
    else:
        urls = [{"url": first, "out": "a.bin"}, {"url": second, "out": "a-again.bin"}]
    with pytest.raises(UsageError) as raised:
        prefetch.torch_dataset([], urls=urls, output_dir=str(tmp_path / "out"), progress=False)
    message = str(raised.value)
    assert "one object" in message and conflict in message, message
    assert "token=one" not in message and "token=two" not in message, message  # (no credential in a message)
    with pytest.raises(UsageError):
        prefetch.tf_generator([], urls=urls, shard=(0, 2), output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # nothing fetched
    assert not [row for row in nginx.served() if row[1] in (200, 206)]


def test_two_signings_with_a_sha256_and_an_md5_are_one_item_checked_by_both(nginx, home, tmp_path):
    """One hash per algorithm: a sha256 on one signing and an md5 on the other were refused as
    "different sha256/md5"; now the object is one item, and its file must match both."""
    data = (nginx.root / "a.bin").read_bytes()
    first, second = _signed(nginx, "a.bin", "one"), _signed(nginx, "a.bin", "two")
    right = [{"url": first, "sha256": hashlib.sha256(data).hexdigest()},
             {"url": second, "md5": hashlib.md5(data).hexdigest()}]
    generate = prefetch.tf_generator([], urls=right, shard=(0, 1), output_dir=str(tmp_path / "out"), progress=False)
    assert [os.path.basename(p) for p in generate()] == ["a.bin"]
    wrong = [right[0], {"url": second, "md5": hashlib.md5(b"other bytes").hexdigest()}]
    generate = prefetch.tf_generator([], urls=wrong, shard=(0, 1), output_dir=str(tmp_path / "other"), progress=False)
    with pytest.raises(prefetch.PrefetchError, match="md5 mismatch"):
        list(generate())
    assert not (tmp_path / "other" / "a.bin").exists()
