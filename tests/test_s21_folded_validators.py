"""A hostile server's folded or broken validators read alike on both paths, and never go back out
broken (a raw server on 127.0.0.1, the real ``Client`` on its direct path and through requests).

urllib3 before 2.8 (this machine has 2.7) keeps an obsolete fold's line break in the value it
reads; the direct path (``net/answer.Head``) puts a folded value on one line, as urllib3 2.8 does.
An ETag a server folded so differed by path, and through a proxy, ``.netrc`` or a cookie (the
requests path) went back out in ``If-Range`` with a line break, which ``http.client`` refuses to
send: each resumed request of that file failed.
"""

from __future__ import annotations

import pytest

from tests.test_direct_http import answers_on_both_paths

HEADS = {
    "folded": (b'Content-Length: 4\r\nETag: "abc\r\n def"\r\nLast-Modified: Mon, 02 Nov 2026\r\n 10:00:00 GMT\r\n\r\n',
               '"abc def"', "Mon, 02 Nov 2026 10:00:00 GMT"),
    "folded-lf": (b'Content-Length: 4\nETag: "abc\n\tdef"\n\n', '"abc def"', None),
}


@pytest.mark.parametrize("case", sorted(HEADS))
def test_a_folded_validator_reads_the_same_on_the_direct_path_and_through_requests(case):
    head, etag, modified = HEADS[case]
    seen = [(resp.headers.get("ETag"), resp.headers.get("Last-Modified")) for _, resp in answers_on_both_paths(head)]
    assert seen == [(etag, modified)] * 2, seen


@pytest.mark.parametrize(("etag", "modified", "sent"), [
    ('"abc\rdef"', "Mon, 02 Nov 2026 10:00:00 GMT", "Mon, 02 Nov 2026 10:00:00 GMT"),  # a stray CR: the date
    ('"abc\x00def"', None, None),  # nothing sendable: no If-Range (the kept bytes are checked otherwise)
    ('"abc"', "Mon, 02 Nov 2026\n 10:00:00 GMT", '"abc"'),
    (None, "Mon, 02 Nov 2026\r10:00:00 GMT", None),
])
def test_a_validator_with_a_control_character_never_goes_out_in_if_range(etag, modified, sent):
    from prefetch.engine.sources import Source

    src = Source(url="http://127.0.0.1:9/x.bin")
    src.etag, src.last_modified = etag, modified
    assert src.validator_headers() == ({"If-Range": sent} if sent else {})
