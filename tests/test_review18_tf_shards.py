"""``tf_generator(..., shard=(index, count))``: each input pipeline of a multi-worker tf.data
run downloads and reads its own share of the shards (a real origin on 127.0.0.1; TensorFlow is
not installed in the tests: the generator ``from_generator`` calls is driven directly).

``torch_dataset`` deals names to ranks; ``tf_generator`` had no way to: under
``MultiWorkerMirroredStrategy`` every worker's generator downloaded every shard (tf.data's
auto-sharding of a generator's dataset only drops elements after they were read), N times the
bytes through a slow route and N copies on disk. ``shard`` is not read from ``TF_CONFIG`` by
itself (with tf.data's data auto-sharding on top, each worker would keep 1/N² of the data): it
is given from ``distribute_datasets_from_function``'s input context.
"""

from __future__ import annotations

import pytest

import prefetch
from prefetch.errors import UsageError
from tests.test_stream_adapters import gets, put_tars


def test_each_pipeline_downloads_and_reads_only_its_share(origin, home, tmp_path):
    entries, names = put_tars(origin, 5)
    urls = [e["url"] + "#sha256=" + e["sha256"] for e in entries]
    options = dict(output_dir=str(tmp_path / "out"), connections=1, progress=False)

    first = list(prefetch.tf_generator(urls, shard=(0, 2), **options)())
    assert first == [str(tmp_path / "out" / n) for n in names[0::2]]
    assert [gets(origin, n) for n in names] == [1, 0, 1, 0, 1]  # the other pipeline's shards: not fetched

    second = list(prefetch.tf_generator(urls, shard=(1, 2), **options)())
    assert second == [str(tmp_path / "out" / n) for n in names[1::2]]
    assert [gets(origin, n) for n in names] == [1, 1, 1, 1, 1]

    listed = list(prefetch.tf_generator([], urls=[{"url": u} for u in urls[:2]], shard=(1, 2), **options)())
    assert listed == [str(tmp_path / "out" / names[1])]  # -i style entries are dealt as names are


@pytest.mark.parametrize("shard", [(2, 2), (-1, 2), (0, 0), (True, 2), "0/2", (0, 2, 1)])
def test_a_shard_that_is_not_one_of_count_is_refused(shard):
    with pytest.raises(UsageError, match="shard must be"):
        prefetch.tf_generator(["http://127.0.0.1:9/a.tar", "http://127.0.0.1:9/b.tar"], shard=shard)


def test_fewer_names_than_pipelines_is_refused_before_the_first_epoch():
    with pytest.raises(UsageError, match="1 name\\(s\\) for 2 input pipelines"):
        prefetch.tf_generator(["http://127.0.0.1:9/a.tar"], shard=(1, 2))
