"""Tempo demo: watch a small VLM compress a long video for a question, then answer.

This file is the page (`build_demo`) and the handlers its events call; the work happens in `tempo/`.
Model: $TEMPO_MODEL / $TEMPO_BASE (hub id or directory), else the embedded Tempo-Tiny. Run: `python app.py`.
"""

from __future__ import annotations

import ctypes
import functools
import html
import json
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import spaces  # inert off ZeroGPU; on ZeroGPU it has to be imported before torch to take over CUDA set-up

import gradio as gr
from gradio.utils import get_upload_folder

import tempo
from tempo import plots, preview, report
from tempo.allocation import STRATEGIES, TRUNCATIONS
from tempo.config import AllocationConfig, GenerationConfig, SamplingConfig

log = logging.getLogger("tempo.app")
ROOT = Path(__file__).resolve().parent
EXAMPLES_FILE = ROOT / "examples" / "examples.json"
QUEUE_SIZE = 16  # requests waiting beyond this are refused ("queue is full") instead of piling up
CACHE_BYTES = 2 * 1024**3  # decoded frames and vision features kept for follow-up questions
SEGMENT_REFRESH_S = 0.25  # timeline redraws while compressing; the first and last segment always show
ANSWER_REFRESH_S = 0.08
API_REFRESH_S = 0.5
KEY_FRAMES = 6
NOT_UPLOADED = ("This server only analyses videos uploaded to it (or its examples): please upload the file "
                "through the page or the API's file upload.")
MALLOC_SETTINGS = {  # environment variable: (mallopt option, value)
    "MALLOC_ARENA_MAX": (-8, 2),  # M_ARENA_MAX
    "MALLOC_MMAP_THRESHOLD_": (-3, 2**20),  # M_MMAP_THRESHOLD: 1 MiB
    "MALLOC_TRIM_THRESHOLD_": (-1, 4 * 2**20),  # M_TRIM_THRESHOLD: 4 MiB
}
FONTS = ["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]


# ------------------------------------------------------------------------------------------------ settings

@dataclass(frozen=True)
class Setting:
    """One advanced setting: a slider (range) or a choice, and the same check for values sent through the API."""

    name: str  # the API argument
    label: str
    default: Any
    minimum: float = 0
    maximum: float = 0
    step: float = 1
    info: str | None = None
    choices: dict[str, str] | None = None  # value: label

    def widget(self) -> gr.components.Component:
        if self.choices is None:
            return gr.Slider(self.minimum, self.maximum, value=self.default, step=self.step, label=self.label,
                             info=self.info)
        options = [(label, value) for value, label in self.choices.items()]
        if len(options) <= 3:
            return gr.Radio(options, value=self.default, label=self.label, info=self.info)
        return gr.Dropdown(options, value=self.default, label=self.label, info=self.info)

    def check(self, value: object) -> object:
        """The value if it fits, else a message naming the setting: Gradio's own checks say only "Value 0 is less
        than minimum value 64". NaN, infinities and fractions go on to `run_config`, which explains them."""
        if self.choices is not None:
            if not isinstance(value, str) or value not in self.choices:
                raise tempo.InputError(f"{self.label} must be one of {', '.join(self.choices)} "
                                       f"(got {_shown(value)}).")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise tempo.InputError(f"{self.label} must be a number (got {_shown(value)}).")
        if math.isfinite(value) and not self.minimum <= value <= self.maximum:
            side = f"less than minimum {self.minimum:g}" if value < self.minimum else \
                f"greater than maximum {self.maximum:g}"
            raise tempo.InputError(f"{self.label} {value:g} is {side} (allowed range "
                                   f"{self.minimum:g}–{self.maximum:g}).")
        return value


def settings(model: tempo.TempoModel) -> list[Setting]:
    """The advanced settings in API order; defaults are the library's (tempo.config) and the checkpoint's."""
    spec, sampling, allocation, generation = model.spec, SamplingConfig(), AllocationConfig(), GenerationConfig()
    return [
        Setting("max_frames", "Max sampled frames", sampling.max_frames, 16, 2048,
                info="2 frames per second up to this cap"),
        Setting("budget", "Visual token budget", spec.visual_token_budget, 64, 16384,
                info="memory tokens shared by all segments"),
        Setting("k_min", "k_min", min(allocation.k_min, spec.num_memory_tokens), 1, spec.num_memory_tokens,
                info="tokens every segment keeps"),
        Setting("strategy", "Allocation strategy", allocation.strategy, choices=STRATEGIES),
        Setting("truncation", "Intra-segment reduction", allocation.truncation, choices=TRUNCATIONS),
        Setting("temperature", "Temperature", generation.temperature, 0, 2, step=0.05, info="0 = greedy"),
        Setting("max_new_tokens", "Max new tokens", generation.max_new_tokens, 1, 2048),
    ]


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _whole(value: float, name: str) -> int:
    if not (isinstance(value, (int, float)) and float(value).is_integer()):
        raise tempo.InputError(f"{name} must be a whole number (got {value!r}).")
    return int(value)


def run_config(server: Server, values: dict[str, object], no_compression: bool = False) -> tempo.RunConfig:
    """The settings' values by name (from the widgets or the API), checked and made a RunConfig; the library
    checks the rest and explains what is wrong."""
    checked = {setting.name: setting.check(values[setting.name]) for setting in server.settings}
    return tempo.RunConfig(
        sampling=SamplingConfig(max_frames=_whole(checked["max_frames"], "Max frames")),
        allocation=AllocationConfig(budget=_whole(checked["budget"], "The budget"),
                                    k_min=_whole(checked["k_min"], "k_min"),
                                    strategy="off" if no_compression else checked["strategy"],
                                    truncation=checked["truncation"]),
        generation=GenerationConfig(max_new_tokens=_whole(checked["max_new_tokens"], "Max new tokens"),
                                    temperature=float(checked["temperature"])),
        limits=server.limits)


# ------------------------------------------------------------------------------------------------ the server

def gpu_seconds(video: str, question: str, config: tempo.RunConfig) -> int:
    """ZeroGPU reservation for one request: start-up plus time per sampled frame (Tempo-6B on one GPU)."""
    return int(20 + 0.08 * config.sampling.max_frames)


def run_on_device(model: tempo.TempoModel, cache: tempo.VideoCache, video: str, question: str,
                  config: tempo.RunConfig) -> Iterator[tempo.events.Event]:
    """The model's work for one request. On ZeroGPU this runs in a GPU worker: what it yields is a picklable CPU
    object."""
    yield from tempo.run(model, video, question, config, cache)


class Server:
    """What every handler needs: the model, the request limits, the per-video cache and where visitors' files are."""

    def __init__(self, model: tempo.TempoModel, limits: tempo.Limits):
        self.model = model
        self.limits = limits
        self.cache = tempo.VideoCache(max_bytes=CACHE_BYTES)
        self.settings = settings(model)
        self.examples = load_examples()
        # Files a visitor may name: this server's uploads and the shipped examples, symlinks resolved.
        self.visitor_folders = (Path(get_upload_folder()).resolve(), EXAMPLES_FILE.parent.resolve())
        # A ZeroGPU Space runs this under spaces.GPU (decorated at start-up, as ZeroGPU requires); elsewhere
        # spaces.GPU hands the function back as it is.
        self.run = spaces.GPU(duration=gpu_seconds)(functools.partial(run_on_device, model, self.cache))


def load_examples() -> list[dict]:
    """examples/examples.json: [{"video", "question", "label"}], keeping the entries whose video is present."""
    if not EXAMPLES_FILE.is_file():
        return []
    entries = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
    return [dict(e, video=str(EXAMPLES_FILE.parent / e["video"])) for e in entries
            if (EXAMPLES_FILE.parent / e["video"]).is_file()]


def visitor_video(server: Server, payload: object) -> str:
    """The file a request names, if it is one this server may open: an upload or an example, after resolving
    symlinks. Anything else gets one message, whether or not the path exists, so nothing about the server's
    files leaks out."""
    path = payload.get("path") if isinstance(payload, dict) else payload
    if not path:
        raise tempo.InputError("Please upload a video (or pick an example) first.")
    try:
        real = Path(os.fspath(path)).resolve()
    except (TypeError, ValueError, OSError):
        raise tempo.InputError(NOT_UPLOADED) from None
    if not any(real.is_relative_to(folder) for folder in server.visitor_folders) or not real.is_file():
        raise tempo.InputError(NOT_UPLOADED)
    return str(real)


def refusal(exc: Exception) -> gr.Error:
    """What the visitor sees: the library's own message for input problems, a short apology for the rest."""
    if isinstance(exc, tempo.TempoError):
        message = str(exc)
    elif isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        message = "The server ran out of memory on this video. Try fewer max frames or a smaller budget."
    else:
        log.exception("request failed")
        message = f"Something went wrong while processing this video ({type(exc).__name__}). Please try again."
    return gr.Error(message, print_exception=False)  # the server log has the traceback where one helps


# ------------------------------------------------------------------------------------------------ HTML pieces

def header_html(model: tempo.TempoModel) -> str:
    spec = model.spec
    note = ""
    if spec.trained_world == "synthetic":
        note = ("<p class='note'>This demo runs <b>Tempo-Tiny</b>, a 1.5M-parameter Tempo that only knows its "
                "synthetic world of moving shapes: try the examples. On your own videos it runs, but its relevance "
                "and answers mean nothing; the real model is Tempo-6B on a GPU.</p>")
    return ("<div class='tempo-header'><h1>Tempo <span>query-aware compression for long videos</span></h1>"
            "<p>A small VLM reads your video 8 frames at a time, packs each segment into memory tokens and scores "
            "how relevant it is to your question; Adaptive Token Allocation spends the token budget where the "
            "relevance is, and a language model answers from what was kept.</p>" + note +
            f"<p class='model'>{html.escape(Path(spec.name).name or spec.name)} · {model.device.type} · "
            f"k_max {spec.num_memory_tokens} memory tokens per segment · context {spec.context_length:,}</p></div>")


def status_html(progress: report.RunProgress, error: str | None = None) -> str:
    """One line saying what is happening, over a progress bar; an ETA while compressing."""
    if error:
        return f"<div class='tempo-status error'>⚠ {html.escape(error)}</div>"
    done, total = len(progress.segments), progress.num_segments
    if progress.stage == "opening":
        text = "Opening the video…"
    elif progress.stage == "compressing":
        reached = report.clock(progress.segments[-1].end if done else 0)
        eta = progress.eta()
        text = (f"Compressing segment {done} of {total} · {reached} of {report.clock(progress.probed.duration)}"
                + (f" · about {eta:.0f} s left" if eta is not None else ""))
    elif progress.stage == "answering":
        text = f"Allocated {progress.allocation.tokens_used:,} of {progress.allocation.budget:,} tokens · answering…"
    else:
        text = f"Done in {progress.finished.timings.get('total', 0.0):.1f} s"
    width = 100 * done / total if total else 0
    return f"<div class='tempo-status'>{text}<div class='bar'><div style='width:{width:.1f}%'></div></div></div>"


def stats_html(result: tempo.Finished, context_truncated: int) -> str:
    stats = report.run_stats(result)
    cards = [
        (f"{stats['segments']:,}",
         f"segments · {stats['sampled_frames']:,} frames over {report.clock(stats['duration'])}"),
        (f"{stats['tokens_used']:,} / {stats['budget']:,}", "visual tokens used / budget"),
        (f"{stats['tokens_per_frame']:.2f}", "tokens per sampled frame"),
        (f"{stats['compression']:.1f}×", f"fewer than all {stats['tokens_without_compression']:,} memory tokens"),
    ]
    body = "".join(f"<div class='card'><div class='value'>{value}</div><div class='label'>{label}</div></div>"
                   for value, label in cards)
    body += "<div class='timings'>" + " · ".join(f"{k} {v:.2f} s" for k, v in result.timings.items()) + "</div>"
    if context_truncated:
        body += (f"<div class='warning'>{context_truncated:,} visual positions were cut to fit the decoder context "
                 "(as in the released code); lower the budget or max frames to keep them all.</div>")
    return f"<div class='tempo-stats'>{body}</div>"


# ------------------------------------------------------------------------------------------------ handlers

def show_preview(server: Server, upload: object) -> Iterator[object]:
    """The video panel for an upload: the file itself when browsers play it, else a small H.264 proxy (the
    analysis still reads the original)."""
    if not upload:
        yield None
        return
    try:
        video = visitor_video(server, upload)
    except tempo.TempoError as exc:
        raise refusal(exc) from None
    if preview.browser_playable(video):
        yield video
        return
    workdir = tempfile.mkdtemp(prefix="tempo-app-")
    try:
        yield str(preview.make_proxy(video, workdir))
    except tempo.TempoError:  # the analysis says what is wrong with the file, if anything
        yield None
    finally:  # Gradio has copied the proxy into its cache by now
        shutil.rmtree(workdir, ignore_errors=True)


def analyze(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
            strategy: str, truncation: str, temperature: float, max_new_tokens: float,
            no_compression: bool) -> Iterator[tuple]:
    """The page: live timeline while compressing, tokens once allocated, then the answer token by token.

    Outputs: status, timeline, answer, key frames, stats, JSON and CSV downloads."""
    values = dict(max_frames=max_frames, budget=budget, k_min=k_min, strategy=strategy, truncation=truncation,
                  temperature=temperature, max_new_tokens=max_new_tokens)
    skip = gr.skip()
    progress, frames, workdir, shown = report.RunProgress(), [], None, 0.0
    yield (status_html(progress), plots.progress_figure(progress), "", None, "", gr.DownloadButton(visible=False),
           gr.DownloadButton(visible=False))
    try:
        config = run_config(server, values, bool(no_compression))
        for event in server.run(visitor_video(server, video), question, config):
            progress.update(event)
            now = time.perf_counter()
            if isinstance(event, tempo.SegmentCompressed):
                frames.append(event.frame)
                if len(frames) == 1 or len(frames) == event.num_segments or now - shown > SEGMENT_REFRESH_S:
                    shown = now
                    yield status_html(progress), plots.progress_figure(progress), skip, skip, skip, skip, skip
            elif isinstance(event, tempo.AllocationDone):
                yield status_html(progress), plots.progress_figure(progress), skip, skip, skip, skip, skip
            elif isinstance(event, tempo.AnswerToken) and now - shown > ANSWER_REFRESH_S:
                shown = now
                yield skip, skip, progress.answer, skip, skip, skip, skip
            elif isinstance(event, tempo.Finished):
                # A folder per request, deleted (finally) once Gradio has copied the files into its cache.
                workdir = tempfile.mkdtemp(prefix="tempo-app-")
                json_path, csv_path = report.export(event, workdir)
                yield (status_html(progress), plots.progress_figure(progress), event.answer,
                       report.key_frames(event.segments, frames, KEY_FRAMES),
                       stats_html(event, progress.allocation.context_truncated),
                       gr.DownloadButton(value=str(json_path), visible=True),
                       gr.DownloadButton(value=str(csv_path), visible=True))
    except Exception as exc:
        error = refusal(exc)
        yield status_html(progress, error=error.message), skip, skip, skip, skip, skip, skip
        raise error from None
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def answer_api(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
               strategy: str, truncation: str, temperature: float, max_new_tokens: float) -> Iterator[dict]:
    """JSON for API clients, streamed: partial while compressing (see `stage`), the full result at the end."""
    values = dict(max_frames=max_frames, budget=budget, k_min=k_min, strategy=strategy, truncation=truncation,
                  temperature=temperature, max_new_tokens=max_new_tokens)
    progress, shown = report.RunProgress(), 0.0
    try:
        config = run_config(server, values)
        for event in server.run(visitor_video(server, video), question, config):
            progress.update(event)
            first = isinstance(event, tempo.SegmentCompressed) and len(progress.segments) == 1
            milestone = isinstance(event, (tempo.AllocationDone, tempo.Finished))
            if first or milestone or time.perf_counter() - shown > API_REFRESH_S:
                shown = time.perf_counter()
                yield progress.to_dict()
    except Exception as exc:
        raise refusal(exc) from None


def bound(handler: Callable, server: Server) -> Callable:
    """`handler` with its server filled in, as Gradio calls it (name and docstring kept for the API page)."""
    fn = functools.partial(handler, server)
    fn.__name__, fn.__doc__ = handler.__name__, handler.__doc__
    return fn


# ------------------------------------------------------------------------------------------------ the page

def build_demo(model: tempo.TempoModel, limits: tempo.Limits | None = None) -> gr.Blocks:
    """The page around `model`; `limits` guard every request (default: from the environment, see tempo.Limits)."""
    server = Server(model, limits or tempo.Limits.from_env())
    with gr.Blocks(title="Tempo · long-video QA", analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        gr.HTML(header_html(model))
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=340):
                upload = gr.File(label="Video", file_types=["video"], file_count="single", height=90,
                                 elem_id="tempo-video")
                video = gr.Video(label="Preview", interactive=False, height=240, elem_id="tempo-preview")
                question = gr.Textbox(label="Question", lines=2, max_length=server.limits.max_question_chars,
                                      placeholder="e.g. When does the speaker show the chart?")
                run_button = gr.Button("Compress & answer", variant="primary", size="lg")
                if server.examples:
                    gr.Examples([[e["video"], e["question"]] for e in server.examples], inputs=[upload, question],
                                example_labels=[e.get("label") or e["question"] for e in server.examples])
                with gr.Accordion("Advanced settings", open=False):
                    widgets = [setting.widget() for setting in server.settings]
                    no_compression = gr.Checkbox(label="No compression (baseline: keep every memory token)")
            with gr.Column(scale=5):
                status = gr.HTML()
                plot = gr.Plot(plots.timeline_figure([]), show_label=False, elem_id="tempo-timeline")
                with gr.Row(equal_height=False):
                    answer = gr.Textbox(label="Answer", lines=4, max_lines=16, interactive=False, buttons=["copy"],
                                        scale=3, elem_id="tempo-answer")
                    with gr.Column(scale=2):
                        stats = gr.HTML()
                        with gr.Row():
                            json_file = gr.DownloadButton("Segments · JSON", visible=False, size="sm")
                            csv_file = gr.DownloadButton("Segments · CSV", visible=False, size="sm")
                gallery = gr.Gallery(label="Key frames: the segments that kept the most tokens", columns=3,
                                     object_fit="cover", format="jpeg", fit_columns=False, elem_id="tempo-gallery")

        strategy = widgets[[s.name for s in server.settings].index("strategy")]
        # Handlers get the raw request values (preprocess=False) and check them themselves: which file may be
        # opened, and settings named in the messages.
        upload.change(bound(show_preview, server), upload, video, api_visibility="private", concurrency_id="preview",
                      concurrency_limit=2, preprocess=False, show_progress="minimal")
        no_compression.change(lambda off: gr.Dropdown(interactive=not off), no_compression, strategy,
                              api_visibility="private", queue=False)
        gr.on([run_button.click, question.submit], bound(analyze, server),
              inputs=[upload, question, *widgets, no_compression],
              outputs=[status, plot, answer, gallery, stats, json_file, csv_file],
              api_name="analyze", concurrency_id="model", show_progress="hidden", preprocess=False)
        # The API twin: same inputs minus the baseline toggle (strategy "off" is that), one JSON output.
        api_result = gr.JSON(label="result", visible=False)
        gr.Button(visible=False).click(bound(answer_api, server), inputs=[upload, question, *widgets],
                                       outputs=api_result, api_name="answer", concurrency_id="model",
                                       preprocess=False)
    return demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=1)


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


def serve(model: tempo.TempoModel, limits: tempo.Limits | None = None, **kwargs) -> gr.Blocks:
    """Build the page around `model` and serve it with the offline theme and the upload limit (`limits` default:
    from the environment); kwargs go to `Blocks.launch`. Returns the running page."""
    tune_malloc()  # before Gradio starts its worker threads
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    limits = limits or tempo.Limits.from_env()
    # System fonts only: the stock themes fetch web fonts, and the demo must work with no internet at all.
    theme = gr.themes.Soft(primary_hue="indigo", secondary_hue="orange", neutral_hue="slate", font=FONTS,
                           font_mono=MONO_FONTS)
    demo = build_demo(model, limits)
    demo.launch(theme=theme, css_paths=[ROOT / "app.css"], max_file_size=limits.max_upload_bytes, **kwargs)
    return demo


def main() -> None:
    """`python app.py`: read the limits, load the model once, serve."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:  # $TEMPO_MAX_QUESTION_CHARS, $TEMPO_MAX_UPLOAD_MB, $TEMPO_MAX_DURATION_MIN; then the model
        limits = tempo.Limits.from_env()
        model = tempo.from_pretrained(os.environ.get("TEMPO_MODEL") or None,
                                      base=os.environ.get("TEMPO_BASE") or None)
    except tempo.TempoError as exc:  # e.g. a malformed limit or no such checkpoint: one line, not a traceback
        raise SystemExit(f"error: {exc}") from None
    serve(model, limits)


if __name__ == "__main__":
    main()
