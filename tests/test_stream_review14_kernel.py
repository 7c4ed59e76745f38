"""The notebook's stop button while a torch ``DataLoader`` with worker processes streams shards, in
a real Jupyter kernel: the interrupt reaches the workers (the kernel's process group), their
downloads stop resumable, and the next cell's epoch resumes them and yields every sample once."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time

from prefetch.cache.layout import part_path, state_path
from tests.test_jobs import poll
from tests.test_stream import on_disk

KiB = 1 << 10


def shard(index: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for k in range(3):
            for ext, data in (("bin", os.urandom(200 * KiB)), ("cls", str(k).encode())):
                info = tarfile.TarInfo(f"s{index}-{k}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_interrupting_a_dataloader_with_workers_stops_their_downloads_and_the_next_epoch_resumes(
        kernel, origin, tmp_path):
    names = [f"shard-{i}.tar" for i in range(4)]
    urls = []
    for name in names:
        data = shard(len(urls))
        origin.put(name, data)
        urls.append(origin.url_for(name) + "#sha256=" + hashlib.sha256(data).hexdigest())
    origin.total_rate = 192 * KiB  # ~3 s a shard: the interrupt comes while shards 2 and 3 download
    out = tmp_path / "out"
    setup = (
        "import prefetch\n"
        "from torch.utils.data import DataLoader\n"
        f"ds = prefetch.torch_dataset({urls!r}, samples=True, output_dir={str(out)!r}, progress=False, "
        "max_ahead=1, connections=1, transform=lambda s: s['__key__'])\n"
    )
    assert kernel.run(setup).error is None
    cell = kernel.start("for key in DataLoader(ds, batch_size=None, num_workers=2):\n"
                        "    print('got', key, flush=True)\n")
    poll(lambda: kernel.poll(cell) or "got s0-0" in cell.rendered, what="the first sample", timeout=90)
    poll(lambda: kernel.poll(cell) or any(state_path(out / n).exists() for n in names[2:]),
         what="a later shard in flight", timeout=60)
    assert cell.ended is None, cell.rendered
    kernel.interrupt()
    interrupted = time.monotonic()
    poll(lambda: kernel.poll(cell), what="the cell to end", timeout=30)
    assert cell.error is not None and cell.error["ename"] == "KeyboardInterrupt", cell.rendered
    time.sleep(1.0)
    kept = on_disk(out, names)
    time.sleep(1.5)
    assert on_disk(out, names) == kept  # no worker downloads any more
    assert not [r for r in origin.requests if r.started > interrupted + 1.0]
    for name in names[2:]:  # nothing half-placed; what was in flight resumable
        assert out.joinpath(name).exists() or part_path(out / name).exists() == state_path(out / name).exists()

    origin.total_rate = None
    again = kernel.run("keys = [k for k in DataLoader(ds, batch_size=None, num_workers=2)]\n"
                       "print(len(keys), sorted(keys) == sorted(f's{i}-{k}' for i in range(4) for k in range(3)))")
    assert again.error is None, again.rendered
    assert "12 True" in again.rendered
    resumed = [r for r in origin.requests if r.started > interrupted + 1.0 and r.headers.get("Range", "bytes=0-")
               and not r.headers.get("Range", "bytes=0-").startswith("bytes=0-")]
    assert resumed  # the second epoch continued a shard the interrupt stopped
