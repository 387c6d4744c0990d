"""Tempo demo: watch a small VLM compress a long video for a question, then answer. UI wiring only.

The work happens in `tempo/` (pipeline, plots, report); this file turns its events into Gradio updates.
Model: $TEMPO_MODEL / $TEMPO_BASE (hub id or directory), else the embedded Tempo-Tiny. Run: `python app.py`.
"""

from __future__ import annotations

import ctypes
import html
import importlib.util
import json
import logging
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # read when gradio is imported


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


tune_malloc()  # before gradio and torch start their threads
ZERO_GPU = bool(os.environ.get("SPACES_ZERO_GPU")) and importlib.util.find_spec("spaces") is not None
if ZERO_GPU:
    import spaces  # before torch, so that ZeroGPU can take over CUDA initialisation

import gradio as gr

import tempo
from tempo import plots, report
from tempo.config import STRATEGIES, TRUNCATIONS

log = logging.getLogger("tempo.app")
ROOT = Path(__file__).resolve().parent
EXAMPLES_FILE = ROOT / "examples" / "examples.json"
try:  # $TEMPO_MAX_QUESTION_CHARS, $TEMPO_MAX_UPLOAD_MB, $TEMPO_MAX_DURATION_MIN
    LIMITS = tempo.Limits.from_env()
except tempo.TempoError as exc:
    raise SystemExit(f"error: {exc}") from None
QUEUE_SIZE = 16  # requests waiting beyond this are refused ("queue is full") instead of piling up
SEGMENT_REFRESH_S = 0.25  # timeline redraws while compressing; the first and last segment always show
ANSWER_REFRESH_S = 0.08
API_REFRESH_S = 0.5
KEY_FRAMES = 6
STRATEGY_LABELS = {"ata": "ATA (adaptive, the paper's)", "uniform": "uniform share", "topk": "top-k segments",
                   "random": "random segments", "adversarial": "least relevant (adversarial)",
                   "off": "off (every memory token)"}
TRUNCATION_LABELS = {"head": "head (first k tokens)", "tail": "tail (last k tokens)", "merge": "merge (average)"}
# System fonts only: the stock themes fetch web fonts, and the demo must work with no internet at all.
THEME = gr.themes.Soft(
    primary_hue="indigo", secondary_hue="orange", neutral_hue="slate",
    font=["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"])


def load_model() -> tempo.TempoModel:
    """The model named by $TEMPO_MODEL / $TEMPO_BASE, else the embedded Tempo-Tiny; loaded once at start-up."""
    return tempo.from_pretrained(os.environ.get("TEMPO_MODEL") or None, base=os.environ.get("TEMPO_BASE") or None)


def gpu_seconds(video: str, question: str, config: tempo.RunConfig) -> int:
    """ZeroGPU reservation for one request: start-up plus time per sampled frame (Tempo-6B on one GPU)."""
    return int(20 + 0.08 * config.sampling.max_frames)


def on_gpu(fn):
    """Run `fn` under spaces.GPU on Hugging Face ZeroGPU; elsewhere (CUDA or CPU) call it as is."""
    return spaces.GPU(duration=gpu_seconds)(fn) if ZERO_GPU else fn


def load_examples() -> list[dict]:
    """examples/examples.json: [{"video", "question", "label"}], keeping the entries whose video is present."""
    if not EXAMPLES_FILE.is_file():
        return []
    entries = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
    return [dict(e, video=str(EXAMPLES_FILE.parent / e["video"])) for e in entries
            if (EXAMPLES_FILE.parent / e["video"]).is_file()]


def run_config(max_frames: float, budget: float, k_min: float, strategy: str, truncation: str,
               temperature: float, max_new_tokens: float, limits: tempo.Limits | None = None) -> tempo.RunConfig:
    """Settings from the widgets or API arguments; the library checks ranges and explains what is wrong."""
    def whole(value: float, name: str) -> int:
        if not (isinstance(value, (int, float)) and float(value).is_integer()):
            raise tempo.InputError(f"{name} must be a whole number (got {value!r}).")
        return int(value)

    return tempo.RunConfig(
        sampling=tempo.SamplingConfig(max_frames=whole(max_frames, "Max frames")),
        allocation=tempo.AllocationConfig(budget=whole(budget, "The budget"), k_min=whole(k_min, "k_min"),
                                          strategy=strategy, truncation=truncation),
        generation=tempo.GenerationConfig(max_new_tokens=whole(max_new_tokens, "Max new tokens"),
                                          temperature=float(temperature)),
        limits=limits or LIMITS)


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


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_number(slider: gr.Slider, payload: object) -> None:
    if isinstance(payload, bool) or not isinstance(payload, (int, float)):
        raise gr.Error(f"{slider.label} must be a number (got {_shown(payload)}).", print_exception=False)
    if math.isfinite(payload) and not slider.minimum <= payload <= slider.maximum:
        side = f"less than minimum {slider.minimum:g}" if payload < slider.minimum else \
            f"greater than maximum {slider.maximum:g}"
        raise gr.Error(f"{slider.label} {payload:g} is {side} (allowed range {slider.minimum:g}–{slider.maximum:g}).",
                       print_exception=False)


def _check_choice(component: gr.Dropdown | gr.Radio, payload: object) -> None:
    values = [value for _, value in component.choices]
    if payload not in values:
        raise gr.Error(f"{component.label} must be one of {', '.join(map(str, values))} (got {_shown(payload)}).",
                       print_exception=False)


def checked(component: gr.components.Component) -> gr.components.Component:
    """Check an API value before the component's own preprocessing, naming the setting: Gradio's own checks say
    only "Value 0 is less than minimum value 64", fail with a generic error on a non-number, and log a traceback.
    NaN and fractions go on to `run_config` and the library, which explain them. (A wrapper, not a subclass:
    Gradio writes a .pyi stub beside the module of every component subclass.)"""
    check = _check_number if isinstance(component, gr.Slider) else _check_choice
    preprocess = component.preprocess

    def checked_preprocess(payload):
        check(component, payload)
        if isinstance(payload, float) and not math.isfinite(payload):
            return payload
        return preprocess(payload)

    component.preprocess = checked_preprocess
    return component


# ------------------------------------------------------------------------------------------------ HTML pieces

def header_html(model: tempo.TempoModel) -> str:
    spec = model.spec
    return ("<div class='tempo-header'><h1>Tempo <span>query-aware compression for long videos</span></h1>"
            "<p>A small VLM reads your video 8 frames at a time, packs each segment into memory tokens and scores "
            "how relevant it is to your question; Adaptive Token Allocation spends the token budget where the "
            "relevance is, and a language model answers from what was kept.</p>"
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


# ------------------------------------------------------------------------------------------------ the app

def build_demo(model: tempo.TempoModel, limits: tempo.Limits | None = None) -> gr.Blocks:
    """The app around `model`; `limits` (default: LIMITS, from the environment) guard every request."""
    spec = model.spec
    limits = limits or LIMITS

    @on_gpu
    def events(video: str, question: str, config: tempo.RunConfig) -> Iterator[tempo.events.Event]:
        # On ZeroGPU this runs in a GPU worker: everything it yields is a picklable CPU object.
        yield from tempo.run(model, video, question, config)

    def start(video: str | None, question: str, config: tempo.RunConfig) -> Iterator[tempo.events.Event]:
        if not video:
            raise tempo.InputError("Please upload a video (or pick an example) first.")
        return events(video, question, config)

    def analyze(video, question, max_frames, budget, k_min, strategy, truncation, temperature, max_new_tokens,
                no_compression):
        """The page: live timeline while compressing, tokens once allocated, then the answer token by token."""
        progress, frames, workdir, shown = report.RunProgress(), [], None, 0.0
        yield {status: status_html(progress), plot: plots.progress_figure(progress), answer: "", gallery: None,
               stats: "", json_file: gr.DownloadButton(visible=False), csv_file: gr.DownloadButton(visible=False)}
        try:
            config = run_config(max_frames, budget, k_min, "off" if no_compression else strategy, truncation,
                                temperature, max_new_tokens, limits)
            for event in start(video, question, config):
                progress.update(event)
                now = time.perf_counter()
                if isinstance(event, tempo.SegmentCompressed):
                    frames.append(event.frame)
                    if len(frames) == 1 or len(frames) == event.num_segments or now - shown > SEGMENT_REFRESH_S:
                        shown = now
                        yield {status: status_html(progress), plot: plots.progress_figure(progress)}
                elif isinstance(event, tempo.AllocationDone):
                    yield {status: status_html(progress), plot: plots.progress_figure(progress)}
                elif isinstance(event, tempo.AnswerToken) and now - shown > ANSWER_REFRESH_S:
                    shown = now
                    yield {answer: progress.answer}
                elif isinstance(event, tempo.Finished):
                    # A folder per request, deleted (finally) once Gradio has copied the files into its cache.
                    workdir = tempfile.mkdtemp(prefix="tempo-app-")
                    json_path, csv_path = report.export(event, workdir)
                    yield {status: status_html(progress), plot: plots.progress_figure(progress),
                           answer: event.answer, gallery: report.key_frames(event.segments, frames, KEY_FRAMES),
                           stats: stats_html(event, progress.allocation.context_truncated),
                           json_file: gr.DownloadButton(value=str(json_path), visible=True),
                           csv_file: gr.DownloadButton(value=str(csv_path), visible=True)}
        except gr.Error:
            raise
        except Exception as exc:
            error = refusal(exc)
            yield {status: status_html(progress, error=error.message)}
            raise error from None
        finally:
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)

    def answer_api(video, question, max_frames, budget, k_min, strategy, truncation, temperature, max_new_tokens):
        """JSON for API clients, streamed: partial while compressing (see `stage`), the full result at the end."""
        progress, shown = report.RunProgress(), 0.0
        try:
            config = run_config(max_frames, budget, k_min, strategy, truncation, temperature, max_new_tokens,
                                limits)
            for event in start(video, question, config):
                progress.update(event)
                first = isinstance(event, tempo.SegmentCompressed) and len(progress.segments) == 1
                milestone = isinstance(event, (tempo.AllocationDone, tempo.Finished))
                if first or milestone or time.perf_counter() - shown > API_REFRESH_S:
                    shown = time.perf_counter()
                    yield progress.to_dict()
        except gr.Error:
            raise
        except Exception as exc:
            raise refusal(exc) from None

    examples = load_examples()
    with gr.Blocks(title="Tempo · long-video QA", analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        gr.HTML(header_html(model))
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=340):
                video = gr.Video(label="Video", sources=["upload"], height=260, elem_id="tempo-video")
                question = gr.Textbox(label="Question", lines=2, max_length=limits.max_question_chars,
                                      placeholder="e.g. When does the speaker show the chart?")
                run_button = gr.Button("Compress & answer", variant="primary", size="lg")
                if examples:
                    gr.Examples([[e["video"], e["question"]] for e in examples], inputs=[video, question],
                                example_labels=[e.get("label") or e["question"] for e in examples])
                with gr.Accordion("Advanced settings", open=False):
                    # API values are checked by `checked` (range, choices) and `run_config` (whole numbers), so
                    # that API callers get messages as clear as the widgets'.
                    max_frames = checked(gr.Slider(16, 2048, value=tempo.SamplingConfig().max_frames, step=1,
                                                   label="Max sampled frames",
                                                   info="2 frames per second up to this cap"))
                    budget = checked(gr.Slider(64, 16384, value=spec.visual_token_budget, step=1,
                                               label="Visual token budget",
                                               info="memory tokens shared by all segments"))
                    k_min = checked(gr.Slider(1, spec.num_memory_tokens, value=min(4, spec.num_memory_tokens), step=1,
                                              label="k_min", info="tokens every segment keeps"))
                    strategy = checked(gr.Dropdown([(STRATEGY_LABELS[s], s) for s in STRATEGIES], value="ata",
                                                   label="Allocation strategy"))
                    truncation = checked(gr.Radio([(TRUNCATION_LABELS[t], t) for t in TRUNCATIONS], value="head",
                                                  label="Intra-segment reduction"))
                    temperature = checked(gr.Slider(0, 2, value=0, step=0.05, label="Temperature",
                                                    info="0 = greedy"))
                    max_new_tokens = checked(gr.Slider(1, 2048, value=512, step=1, label="Max new tokens"))
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

        settings = [max_frames, budget, k_min, strategy, truncation, temperature, max_new_tokens]
        no_compression.change(lambda off: gr.Dropdown(interactive=not off), no_compression, strategy,
                              api_visibility="private", queue=False)
        gr.on([run_button.click, question.submit], analyze, inputs=[video, question, *settings, no_compression],
              outputs=[status, plot, answer, gallery, stats, json_file, csv_file],
              api_name="analyze", concurrency_id="model", show_progress="hidden")
        # The API twin: same inputs minus the baseline toggle (strategy "off" is that), one JSON output.
        api_result = gr.JSON(label="result", visible=False)
        gr.Button(visible=False).click(answer_api, inputs=[video, question, *settings], outputs=api_result,
                                       api_name="answer", concurrency_id="model")
    demo.tempo_limits = limits  # read by `launch` for the upload limit
    return demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=1)


def launch(demo: gr.Blocks, **kwargs) -> tuple:
    """Serve with the offline theme and the upload limit; kwargs go to `Blocks.launch`."""
    limits = getattr(demo, "tempo_limits", LIMITS)
    return demo.launch(theme=THEME, css_paths=[ROOT / "app.css"], max_file_size=limits.max_upload_bytes, **kwargs)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        model = load_model()
    except tempo.TempoError as exc:  # e.g. no such checkpoint: one line, not a traceback
        raise SystemExit(f"error: {exc}") from None
    launch(build_demo(model))
