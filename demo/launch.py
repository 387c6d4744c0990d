"""Serving the page: the process's memory settings, the offline theme, the upload limit, and the model chosen by
the environment: $TEMPO_MODEL / $TEMPO_BASE (a hub id or a directory), else the released Tempo-6B on a Hugging Face
Space with a GPU (ZeroGPU's included), else the embedded Tempo-Tiny."""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import gradio as gr
import torch
from gradio.utils import get_upload_folder
from spaces.config import Config as SpacesConfig
from starlette.middleware import Middleware

from tempo.config import Limits
from tempo.engine import warm_up_decoding
from tempo.errors import TempoError
from tempo.model import TempoModel, from_pretrained
from tempo.render.style import FONTS, MONO_FONTS
from tempo.settings import limits_from_env

from .hosts import HostCheck, host_rule
from .layout import build_demo
from .stores import TrimAfterRequests, UploadStore
from .tools import mend_mcp_progress

CSS = Path(__file__).resolve().parent / "app.css"
SPACE_MODEL = "Vision-CAIR/Tempo-6B"  # what a Space serves unless $TEMPO_MODEL says otherwise
MALLOC_SETTINGS = {  # environment variable: (mallopt option, value)
    "MALLOC_ARENA_MAX": (-8, 2),  # M_ARENA_MAX
    "MALLOC_MMAP_THRESHOLD_": (-3, 2**20),  # M_MMAP_THRESHOLD: 1 MiB
    "MALLOC_TRIM_THRESHOLD_": (-1, 4 * 2**20),  # M_TRIM_THRESHOLD: 4 MiB
}


def tune_malloc() -> None:
    """Keep a long-running server's memory flat under glibc. By default every thread that allocates gets its own
    arena (Gradio's ~40 worker threads, the per-request decoding threads), and the mmap and trim thresholds grow
    with the largest buffer freed so far, so freed memory stays mapped. Under 8 concurrent clients the server's
    resident memory rose 10-40% above its warm size within 50 requests; with 2 arenas and fixed thresholds it
    stays within a few percent (tests/test_load.py). A setting given through the environment wins; elsewhere
    than glibc this does nothing."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    for variable, (option, value) in MALLOC_SETTINGS.items():
        if variable not in os.environ:
            mallopt(option, value)


def theme() -> gr.themes.Base:
    """System fonts only: the stock themes fetch web fonts, and the demo must work with no internet at all."""
    return gr.themes.Soft(primary_hue="indigo", secondary_hue="orange", neutral_hue="slate", font=list(FONTS),
                          font_mono=list(MONO_FONTS))


def serve(model: TempoModel, limits: Limits | None = None, **kwargs: Any) -> gr.Blocks:
    """Build the page around `model` and serve it with the offline theme and the upload limit (`limits` default:
    from the environment; videos are always decoded in killable child processes), behind the host check and the
    upload folder's cap (`middleware`), keeping at most `limits.sessions` sessions; kwargs go to `Blocks.launch`.
    Returns the running page."""
    tune_malloc()  # before Gradio starts its worker threads
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    # no visitor's file can take it down; the page says how the model's weights are held
    limits = replace(limits or limits_from_env(), isolate_decoding=True, int8=model.int8)
    warm_up_decoding()  # the decoding processes' fork server, started before the first request needs it
    demo = build_demo(model, limits)
    kwargs.setdefault("mcp_server", importlib.util.find_spec("mcp") is not None)  # the tools, where gradio[mcp] is
    if kwargs["mcp_server"]:
        mend_mcp_progress()
    # Gradio warns of a tool with a gr.State input: that is the page's /analyze (its conversation), not a tool.
    warnings.filterwarnings("ignore", message="This MCP server includes a tool that has a gr.State input")
    kwargs.setdefault("state_session_capacity", limits.sessions)  # Gradio's default keeps 10,000 sessions' state
    kwargs["app_kwargs"] = {**kwargs.get("app_kwargs", {}), "middleware": middleware(demo, limits, kwargs)}
    demo.launch(theme=theme(), css_paths=[CSS], max_file_size=limits.max_upload_bytes, **kwargs)
    return demo


def middleware(demo: gr.Blocks, limits: Limits, launch: dict) -> list[Middleware]:
    """What every request passes through before Gradio: the host check on a local server or a Space (`hosts`),
    then the upload folder's cap (`stores`), and whatever middleware `launch`'s app_kwargs already name."""
    server_name = launch.get("server_name") or os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1"
    rule = host_rule(server_name, limits.allowed_hosts, os.environ)

    def kept() -> set[str]:  # the examples' copies, which Gradio's own clean-up keeps too
        return set().union(*(getattr(block, "keep_in_cache", set()) for block in demo.blocks.values()))

    # Gradio's own paths (its lists of files, the examples' copies) start with the folder as given, not resolved.
    store = UploadStore(Path(os.path.abspath(get_upload_folder())), limits.uploads_mb * 2**20, kept,
                        demo.temp_file_sets)
    layers = [Middleware(HostCheck, rule=rule)] if rule is not None else []
    return [*layers, Middleware(TrimAfterRequests, store=store), *launch.get("app_kwargs", {}).get("middleware", [])]


def load_model() -> TempoModel:
    """The model the environment names (see the module's docstring), loaded once. On a ZeroGPU Space it lands on
    `cuda` here, at start-up, as ZeroGPU expects: its CUDA is emulated outside the GPU function."""
    on_a_space = bool(os.environ.get("SPACE_ID"))  # Hugging Face sets it in every Space
    with_a_gpu = SpacesConfig.zero_gpu or torch.cuda.is_available()
    name = os.environ.get("TEMPO_MODEL") or (SPACE_MODEL if on_a_space and with_a_gpu else None)
    return from_pretrained(name, base=os.environ.get("TEMPO_BASE") or None, int8=limits_from_env().int8)


def main() -> None:
    """`python app.py`: read the limits, load the model once, serve."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:  # $TEMPO_MAX_QUESTION_CHARS, $TEMPO_MAX_UPLOAD_MB, $TEMPO_MAX_DURATION_MIN; then the model
        limits = limits_from_env()
        model = load_model()
    except TempoError as exc:  # e.g. a malformed limit or no such checkpoint: one line, not a traceback
        raise SystemExit(f"error: {exc}") from None
    serve(model, limits)
