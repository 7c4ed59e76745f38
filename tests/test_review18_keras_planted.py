"""``prefetch.get_file`` (the Keras drop-in) made its ``datasets/`` folder with ``os.makedirs``
before the flow looked at the way there: a ``cache_dir`` that another user had planted as a
symbolic link (a shared ``/tmp/.keras``, Keras' own fallback when the home is not writable)
got an empty ``datasets/`` in the link's target, and only then did the flow refuse the link.
prefetch never writes through a link it did not create: the folder is now made by the flow,
which refuses the link first, so the target is left as it was."""

from __future__ import annotations

import pytest

import prefetch
from prefetch.errors import LocalFileError
from tests.test_links_audit import assert_untouched, plant_link, victim_dir  # noqa: F401 - fixtures
from tests.test_shared_cache import shared  # noqa: F401 - fixture


def test_get_file_never_makes_its_folder_through_a_planted_cache_dir(origin, home, shared, victim_dir):
    origin.put("plain.bin", b"x" * 1000)
    plant_link(victim_dir, shared / ".keras")  # another user's link where our cache_dir is
    with pytest.raises(LocalFileError, match="refusing to use"):
        prefetch.get_file("plain.bin", origin.url_for("plain.bin"), cache_dir=str(shared / ".keras"))
    assert_untouched(victim_dir=victim_dir)  # no datasets/ made through the link


def test_get_file_still_makes_its_folders_when_none_exist(origin, home, tmp_path):
    origin.put("plain.bin", b"y" * 1000)
    (tmp_path / "k").mkdir()  # (a cache_dir that is not there or not writable is /tmp/.keras, as in Keras)
    path = prefetch.get_file("plain.bin", origin.url_for("plain.bin"), cache_dir=str(tmp_path / "k"),
                             cache_subdir="deep/er")
    assert path == str(tmp_path / "k" / "deep" / "er" / "plain.bin")
    assert (tmp_path / "k" / "deep" / "er" / "plain.bin").read_bytes() == b"y" * 1000
