"""app.py on a free loopback port, for the benchmarks that drive it over HTTP (soak, live, app_first_segment)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(scratch: Path, command: list[str] | None = None, timeout: float = 300.0,
              **env: str) -> tuple[subprocess.Popen, str]:
    """`python app.py` (or `command`) with its temporary files, uploads and log under `scratch` and `env` added
    to the environment; (process, URL) once it answers, else SystemExit with the log's end."""
    port = free_port()
    for name in ("tmp", "uploads"):
        (scratch / name).mkdir(exist_ok=True)
    environment = dict(os.environ, GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port),
                       TMPDIR=str(scratch / "tmp"), GRADIO_TEMP_DIR=str(scratch / "uploads"),
                       GRADIO_ANALYTICS_ENABLED="False", **env)
    log = (scratch / "app.log").open("w")  # a pipe nobody reads would fill and stop the app
    process = subprocess.Popen(command or [sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=environment,
                               stdout=log, stderr=subprocess.STDOUT, text=True)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise SystemExit(f"app.py exited during start-up:\n{(scratch / 'app.log').read_text()[-2000:]}")
        try:
            if httpx.get(url + "/gradio_api/info", timeout=5).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"app.py did not start within {timeout:.0f} s")
        time.sleep(0.5)
