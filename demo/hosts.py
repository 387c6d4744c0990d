"""Local pages only, for a local server: the MCP specification's rule against DNS rebinding. A server listening on
a loopback address answers a request only when its `Host` names this machine (localhost, 127.0.0.1, [::1], any
port) and its `Origin`, if it has one, does too; otherwise a page on another site could reach it through the
visitor's browser (a name that resolves to 127.0.0.1 after the page loaded) and use the model, the uploads and the
tools. On a Hugging Face Space the Space's own host is allowed as well, and `Origin` alone is checked: the Space's
proxy decides which names reach it. `Limits.allowed_hosts` adds names (a lab machine, a reverse proxy's name)."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# A Space's page is embedded in huggingface.co's, which may call it too (Gradio trusts these hosts as well).
SPACE_SITES = ("huggingface.co", "hf.co")
REFUSED = "This Tempo server answers only {where}, and this request came from {site} (TEMPO_ALLOWED_HOSTS adds names)."


@dataclass(frozen=True)
class HostRule:
    """Whom a server answers: `hosts` (names, lower case, without ports); `check_host` off where a proxy in front
    decides which names reach the server (a Space)."""

    hosts: frozenset[str]
    check_host: bool = True

    def refusal(self, headers: Mapping[str, list[str]]) -> str | None:
        """The sentence a request with these headers (name: its values) gets, or None when it passes; a header
        given twice must pass both times."""
        if self.check_host:
            hosts = headers.get("host") or [""]
            for host in hosts:
                if not self.allows(hostname(host)):
                    return self.sentence(host or "no named host")
        for origin in headers.get("origin", []):
            if not self.allows(urlsplit(origin).hostname or ""):
                return self.sentence(origin)
        return None

    def allows(self, name: str) -> bool:
        name = name.lower()
        return name in self.hosts or any(name.endswith("." + site) or name == site for site in self.sites)

    @property
    def sites(self) -> tuple[str, ...]:
        return () if self.check_host else SPACE_SITES

    def sentence(self, site: str) -> str:
        more = "".join(f", {name}" for name in sorted(self.hosts - LOCAL_NAMES))
        where = (f"pages on its own site ({', '.join(SPACE_SITES)}{more})" if not self.check_host else
                 f"pages and clients on this machine (localhost, 127.0.0.1, [::1]{more})")
        return REFUSED.format(where=where, site=site[:200])


def hostname(host: str) -> str:
    """The name in a Host header, without its port: "[::1]:7860" -> "::1", "Localhost:80" -> "localhost"."""
    return urlsplit("//" + host).hostname or ""


def is_loopback(server_name: str) -> bool:
    """Whether a server listening on `server_name` (an address or a name) can only be reached from this machine."""
    name = server_name.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def names(text: str) -> set[str]:
    """Host names from comma- or space-separated text, lower case, ports dropped."""
    return {hostname(part) for part in text.replace(",", " ").split() if hostname(part)}


def host_rule(server_name: str, allowed: str, environ: Mapping[str, str]) -> HostRule | None:
    """The rule for a server listening on `server_name` with the `allowed` setting, or None where none applies
    (a server on a network address, not a Space, answers every name: it was put there to be reached)."""
    extra = names(allowed)
    if environ.get("SPACE_ID") or environ.get("SPACE_HOST"):
        return HostRule(frozenset(LOCAL_NAMES | extra | names(environ.get("SPACE_HOST", ""))), check_host=False)
    if is_loopback(server_name):
        return HostRule(frozenset(LOCAL_NAMES | extra))
    return None


class HostCheck:
    """ASGI middleware: every HTTP request and WebSocket (the page, the API, uploads, files, MCP) goes through
    `rule` first; a refused one gets 403 and one sentence."""

    def __init__(self, app: ASGIApp, rule: HostRule):
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        sentence = self.rule.refusal(decoded(scope["headers"]))
        if sentence is None:
            return await self.app(scope, receive, send)
        log.info("refused %s %s: %s", scope.get("method", "WEBSOCKET"), scope.get("path"), sentence)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008, "reason": sentence[:120]})
        body = sentence.encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def decoded(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """ASGI's raw headers as {lower-case name: its values}."""
    found: dict[str, list[str]] = {}
    for name, value in headers:
        found.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return found
