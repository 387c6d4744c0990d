"""How a tool caller (an agent) hands over a video, as one string: a file uploaded to this server first (the path
`/gradio_api/upload` returned, or this server's `/gradio_api/file=` URL for it), a `data:` URI, or a public
http(s) URL, which the server fetches itself. Whatever arrives lands in the upload folder, content-addressed as
Gradio's own uploads, and goes through the same checks as an upload. The server never fetches from a loopback,
private or link-local address: it must not become a way to reach internal hosts for others."""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import mimetypes
import os
import re
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tempo.config import Limits
from tempo.engine import check_size
from tempo.errors import InputError
from tempo.fetch import Fetcher

FILE_ROUTE = "/gradio_api/file="
TIMEOUT_S = 30.0  # connecting, and between two chunks of the download
CHUNK = 2**20
# Hugging Face's own hosts are trusted as Gradio trusts them: from inside a Space they resolve to internal addresses.
TRUSTED_HOSTS = ("hf.co", "huggingface.co")
HOW = ("Hand the video over as a public http(s) URL, a data: URI, or upload it first (POST it to "
       "/gradio_api/upload) and give the path that returns.")


def handed_over(video: object, uploads: Path, limits: Limits) -> str:
    """The path, inside `uploads`, of the video a tool call names; an upload's path is returned as given (the
    server's `visitor_video` checks it like any other)."""
    if not isinstance(video, str) or not video.strip():
        raise InputError(f"Please give a video. {HOW}")
    video = video.strip()
    if video.startswith("data:"):
        return from_data_uri(video, uploads, limits)
    scheme = urlsplit(video).scheme.lower()
    if scheme in ("http", "https"):
        own = own_upload(video, uploads)
        return own if own is not None else fetched(video, uploads, limits)
    if re.match(r"^[a-z][a-z0-9+.-]*://", video, re.IGNORECASE):
        raise InputError(f"This server does not read {scheme}: addresses. {HOW}")
    return video


def own_upload(url: str, uploads: Path) -> str | None:
    """The file an `/gradio_api/file=` URL names, when it is one of this server's uploads (uploads are stored under
    the SHA-256 of their content, so the same path here is the same file): no fetch, and no loopback address to
    refuse when the caller runs beside the server."""
    path = urlsplit(url).path
    if FILE_ROUTE not in path:
        return None
    named = Path(unquote(path.split(FILE_ROUTE, 1)[1]))
    try:
        real = named.resolve()
    except (OSError, ValueError):
        return None
    return str(real) if real.is_relative_to(uploads) and real.is_file() else None


def from_data_uri(uri: str, uploads: Path, limits: Limits) -> str:
    """A `data:video/...;base64,` URI written to the upload folder (its size checked before it is decoded)."""
    header, _, payload = uri.partition(",")
    if not header.endswith(";base64") or not payload:
        raise InputError("A data: URI must be base64, as data:video/mp4;base64,<the file's bytes>.")
    check_size(len(payload) * 3 // 4, limits)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("The data: URI's base64 is not valid.") from None
    mime = header[len("data:"):].split(";")[0]
    return stored([data], "video" + (mimetypes.guess_extension(mime) or ".mp4"), uploads)


def stored(chunks: Iterable[bytes], name: str, uploads: Path) -> str:
    """`chunks` (bytes) written to uploads/<sha256 of the content>/<name>, as Gradio stores an upload."""
    uploads.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=uploads, prefix=".handed-", delete=False) as partial:
        try:
            for chunk in chunks:
                digest.update(chunk)
                partial.write(chunk)
        except BaseException:
            partial.close()
            os.unlink(partial.name)
            raise
    folder = uploads / digest.hexdigest()
    folder.mkdir(exist_ok=True)
    target = folder / (re.sub(r"[^\w.-]", "_", name)[:100] or "video")
    os.replace(partial.name, target)
    return str(target)


def public_address(host: str) -> str | None:
    """An address of `host` that is on the public internet (None for a trusted host: connect by name); refused
    when it has none."""
    if any(host == trusted or host.endswith("." + trusted) for trusted in TRUSTED_HOSTS):
        return None
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise InputError(f"The video's host {host!r} could not be found. {HOW}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]  # an IP address: str
    if not addresses or not all(address.is_global for address in addresses):
        raise InputError(f"The video's host {host!r} is not a public internet address; this server does not fetch "
                         f"from local or private networks. {HOW}")
    return str(addresses[0])


def fetched(url: str, uploads: Path, limits: Limits) -> str:
    """A public http(s) URL downloaded into the upload folder, each redirect checked again (`tempo.fetch`), refused
    as soon as it passes the upload limit."""
    fetcher = Fetcher(public_address, TIMEOUT_S, "video", InputError)
    with fetcher.response(url) as response:
        check_size(int(response.headers.get("content-length") or 0), limits)
        name = Path(unquote(urlsplit(response.extensions["final_url"]).path)).name or "video.mp4"
        return stored(limited(response.iter_bytes(CHUNK), limits), name, uploads)


def limited(chunks: Iterable[bytes], limits: Limits) -> Iterator[bytes]:
    """`chunks` until their total passes the upload limit (whatever the server said the size would be)."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        check_size(total, limits)
        yield chunk
