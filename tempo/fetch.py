"""HTTP GETs that go only where a check allows: every request and every redirect connects to the address
`check(host)` gives, not to whatever the name resolves to next (DNS rebinding), while the host's name stays in the
Host header and TLS. Live mode reads streams through it, and the demo the videos handed to its tools."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from urllib.parse import urljoin, urlsplit

import httpx

from .errors import TempoError

MAX_REDIRECTS = 5
Check = Callable[[str], "str | None"]  # a host -> the address to connect to (None: by name); raises to refuse it


class PinnedTransport(httpx.HTTPTransport):
    """Connects to the address that was checked, keeping the host's name for TLS and the Host header (which the
    request already carries as the URL gave it, with its port)."""

    def __init__(self, address: str):
        super().__init__()
        self.address = address

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        request.url = request.url.copy_with(host=self.address)
        request.extensions = {**request.extensions, "sni_hostname": host}
        return super().handle_request(request)


class Fetcher:
    """GETs where every request and every redirect goes to the address `check(host)` gives (default: any, by name).
    A failure raises `error` with a sentence about the `what` fetched ("stream", "video"), then `ending` (what
    the failure means for the caller's work, e.g. ", so the watch ended")."""

    def __init__(self, check: Check = lambda host: None, timeout: float = 10.0, what: str = "stream",
                 error: type[TempoError] = TempoError, ending: str = "") -> None:
        self.check, self.timeout, self.what, self.error, self.ending = check, timeout, what, error, ending

    def address(self, host: str) -> str:
        """Where to connect for `host` (for protocols that are not HTTP)."""
        return self.check(host) or host

    @contextlib.contextmanager
    def response(self, url: str) -> Iterator[httpx.Response]:
        """An open response to GET `url`, after the redirects (each checked); not 200 is refused. Its
        `extensions["final_url"]` is where it came from in the end."""
        for _ in range(MAX_REDIRECTS + 1):
            host = urlsplit(url).hostname
            if not host:
                raise self.error(f"The {self.what}'s URL has no host: {url[:200]}")
            address = self.check(host)
            client = httpx.Client(transport=PinnedTransport(address) if address else None, timeout=self.timeout)
            try:
                with client.stream("GET", url, follow_redirects=False) as response:
                    if response.is_redirect:
                        url = urljoin(url, response.headers.get("location", ""))
                        continue
                    if response.status_code != 200:
                        raise self.error(f"Fetching the {self.what} failed: {host} answered HTTP "
                                         f"{response.status_code}{self.ending}.")
                    response.extensions["final_url"] = url
                    yield response
                    return
            except httpx.HTTPError as exc:
                raise self.error(f"The {self.what}'s server {host} cannot be reached ({type(exc).__name__})"
                                 f"{self.ending}.") from None
            finally:
                client.close()
        raise self.error(f"The {self.what}'s URL redirects more than {MAX_REDIRECTS} times.")
