"""Shared by the app tests: which model they run on, and the app served in-process on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil

from demo.launch import serve as launch

ROOT = Path(__file__).resolve().parent.parent


def load_app_model(fixtures: Path):
    """$TEMPO_MODEL / $TEMPO_BASE when set; else the embedded Tempo-Tiny, the app's own default."""
    import tempo

    return tempo.from_pretrained(os.environ.get("TEMPO_MODEL") or None, base=os.environ.get("TEMPO_BASE") or None,
                                 device="cpu")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(model, limits=None) -> Iterator[str]:
    """The demo around `model` (and `limits`, else the environment's) on 127.0.0.1: its URL, closed afterwards."""
    with contextlib.redirect_stdout(sys.stderr):  # Gradio announces the MCP server even when quiet
        demo = launch(model, limits, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                      quiet=True)
    try:
        yield demo.local_url.rstrip("/")
    finally:
        demo.close()


def decoding_processes() -> list[psutil.Process]:
    """This process's decoding children (the fork server's own children): none once requests have ended."""
    server = [p for p in psutil.Process().children() if "forkserver" in " ".join(p.cmdline())]
    return [child for fork_server in server for child in fork_server.children()]
