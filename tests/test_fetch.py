"""The one pinned fetcher (`tempo.fetch`), which the tools' handed-over videos and live streams both use: every hop
of a redirect is checked again and connects to the address its check gave, and a loop of redirects ends."""

from __future__ import annotations

import http.server
import threading

import pytest

from tempo.errors import InputError
from tempo.fetch import MAX_REDIRECTS, Fetcher


@pytest.fixture
def web():
    """A server on the loopback that redirects /hop/N to /hop/N-1 (and /hop/0 to /video), /loop to itself and /away
    to another host, and serves /video."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            host = self.headers["Host"]
            if self.path.startswith("/hop/"):
                left = int(self.path.rsplit("/", 1)[1])
                target = f"http://{host}/hop/{left - 1}" if left else f"http://{host}/video"
            elif self.path == "/loop":
                target = f"http://{host}/loop"
            elif self.path == "/away":
                target = f"http://internal.example:{self.server.server_address[1]}/video"
            else:
                body = f"served to {host}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(302)
            self.send_header("Location", target)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def check(asked: list[str]):
    """The public host resolves to the loopback here (the pinned address); any other host is refused."""

    def address(host: str) -> str:
        asked.append(host)
        if host != "public.example":
            raise InputError(f"{host} is not a public address")
        return "127.0.0.1"
    return address


def test_each_hop_is_checked_again_and_connects_where_its_check_said(web):
    asked: list[str] = []
    fetcher = Fetcher(check(asked), what="video", error=InputError)
    with fetcher.response(f"http://public.example:{web}/hop/{MAX_REDIRECTS - 1}") as response:
        assert response.read() == f"served to public.example:{web}".encode()  # the name kept for the Host header
        assert response.extensions["final_url"].endswith("/video")
    assert asked == ["public.example"] * (MAX_REDIRECTS + 1)  # the first request, then a check for each hop
    with pytest.raises(InputError, match="internal.example is not a public address"):
        with fetcher.response(f"http://public.example:{web}/away"):
            pass
    assert asked[-2:] == ["public.example", "internal.example"]  # refused before anything was sent there


def test_a_loop_of_redirects_ends_with_a_sentence(web):
    fetcher = Fetcher(check([]), what="stream", error=InputError)
    with pytest.raises(InputError, match=f"The stream's URL redirects more than {MAX_REDIRECTS} times"):
        with fetcher.response(f"http://public.example:{web}/loop"):
            pass
