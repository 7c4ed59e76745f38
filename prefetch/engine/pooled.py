"""A client lent by a host (``engine/hosts.py``): its requests count against the host's cap, and
``close()`` gives it back, connection and all, for the next worker of any file."""

from __future__ import annotations

_CROWDED = (429, 503)


class PooledClient:
    """An HTTP client lent by a :class:`Host`: ``close()`` gives it back, connection and all.

    Answers 429 and 503 are reported to the host (its cap goes down) before the caller
    sees them; everything else is the lent client's.
    """

    def __init__(self, host, client, key=None) -> None:
        self._host = host
        self._client = client
        self._key = key
        self._closed = False
        self._admitted = False  # this client counts as one of the host's open connections

    def request(self, url: str, **kwargs):
        if not self._admitted:
            self._host.admit()  # waits while the host's cap is in use (a lowered cap holds here)
            self._admitted = True
        resp = self._client.request(url, **kwargs)
        if resp.status in _CROWDED:
            self._admitted = False
            self._host.refused(resp.status)  # ... and this worker's retry waits its turn
        return resp

    def connect(self, url: str) -> bool:
        """Open the connection ahead of the first request (``Client.connect``): it counts as one of the host's from now."""
        if not self._admitted:
            if not self._host.try_admit():
                return False  # the host's connections are all in use: the first request waits its turn
            self._admitted = True
        return self._client.connect(url)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._admitted:
                self._admitted = False
                self._host.dismiss()
            self._host.give_back(self._client, self._key)

    def __getattr__(self, name):
        return getattr(self._client, name)

    def __enter__(self) -> "PooledClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
