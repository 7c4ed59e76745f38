"""The wire: requests underneath, deadlines, and failures named in one line.

Owns:
    http.py        ``Client`` (one requests session per transfer, bounded reads,
                   redirects, proxies; ``connect``: a connection opened ahead), ``open_url``, ``Timeouts``
    response.py    ``Response``: one answer, its body read into a reused buffer or spliced
    direct.py      the direct path for requests that need nothing of requests: a pool of our own connections
    direct_conn.py one direct connection (TCP, TLS by tls_context.py), ``ConnectFailed``
    write_head.py  a direct request's head, as urllib3 and http.client write it
    answer.py      a direct answer as ``Response`` reads it (``Answer``, ``Head``)
    pipeline.py    HTTP/1.1 pipelining: the answer to a request sent ahead, checked (else refused, sent again)
    pipeline_send.py  ... the request sent ahead on a direct connection still reading its answer
    tls_context.py requests' TLS verification, one context per bundle (direct connections and session pools)
    connection.py  the urllib3 adapters under requests (the same resolve, connect and head deadline)
    open_socket.py ``PREFETCH_RESOLVE``, the watched TCP connect, ``abort_head`` (a stop)
    read_head.py   an answer's head within the read timeout, parsed without the email package
    deadlines.py   one watchdog thread for every response-head deadline (no timer thread per request)
    failures.py    ``Failure`` kinds and ``TransientHTTPError``: what went wrong, retryable or not
    unresolved.py  a name that does not resolve before anything was reached: no internet, said at once
    unreachable.py a connect refused or unreachable at once to a host never reached: said in seconds;
                   the next step for a network that is off (``advice``)
    urls.py        which URLs are accepted (``check_url``, ``is_url``), ``redact_url`` for messages
    local.py       ``file://`` origins: a local file answered like a Range server (ETag, If-Range)
    proxies.py     the proxy a URL goes through (no password shown); a failing proxy named
    sniff.py       what a body is (a web page where data was promised)
    jsonapi.py     ``get_json``: a hub API's JSON GET with a few attempts (Hugging Face, ModelScope)
    splice.py      a plain-HTTP body moved from the socket into the file in the kernel (Linux ``splice``)

May import: ``errors``, ``model``. requests is imported lazily (start-up time).
"""
