"""The wire: requests underneath, deadlines, and failures named in one line.

Owns:
    http.py        ``Client`` (one requests session per transfer, bounded reads,
                   redirects, proxies; ``connect``: a connection opened ahead), ``open_url``, ``Timeouts``
    response.py    ``Response``: one answer, its body read into a reused buffer or spliced
    direct.py      the urllib3 path for requests that need nothing of requests
    connection.py  urllib3 adapters with connect/read deadlines, address overrides
    deadlines.py   one watchdog thread for every response-head deadline (no timer thread per request)
    failures.py    ``Failure`` kinds and ``TransientHTTPError``: what went wrong, retryable or not
    urls.py        which URLs are accepted (``check_url``, ``is_url``), ``redact_url`` for messages
    local.py       ``file://`` origins: a local file answered like a Range server (ETag, If-Range)
    proxies.py     the proxy a URL goes through (no password shown); a failing proxy named
    sniff.py       what a body is (a web page where data was promised)
    jsonapi.py     ``get_json``: a hub API's JSON GET with a few attempts (Hugging Face, ModelScope)
    splice.py      a plain-HTTP body moved from the socket into the file in the kernel (Linux ``splice``)

May import: ``errors``, ``model``. requests is imported lazily (start-up time).
"""
