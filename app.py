"""Tempo demo: watch a small VLM compress a long video for a question, then answer, and look at it from every side.

This file is the page (`build_demo`) and the handlers its events call; the work happens in `tempo/`.
Model: $TEMPO_MODEL / $TEMPO_BASE (hub id or directory), else the embedded Tempo-Tiny. Run: `python app.py`.

API endpoints (gradio_client): /answer (JSON, streamed), /compare, /sweep and /segment (JSON), /report (an HTML
file), and /analyze, which is what the page itself calls. Every one takes the video and the question first, then
the settings: max_frames, budget, k_min, strategy, truncation, temperature, max_new_tokens.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import spaces  # inert off ZeroGPU; on ZeroGPU it has to be imported before torch to take over CUDA set-up

import gradio as gr
from gradio.utils import get_upload_folder

import tempo
from tempo import analysis, page, plots, preview, report, share
from tempo.allocation import STRATEGIES, TRUNCATIONS, allocate
from tempo.config import AllocationConfig, GenerationConfig, SamplingConfig
from tempo.synthetic import Question, is_correct

log = logging.getLogger("tempo.app")
ROOT = Path(__file__).resolve().parent
EXAMPLES_FILE = ROOT / "examples" / "examples.json"
QUEUE_SIZE = 16  # requests waiting beyond this are refused ("queue is full") instead of piling up
CACHE_BYTES = 2 * 1024**3  # decoded frames, vision features and recent compressions kept for follow-ups
SEGMENT_REFRESH_S = 0.25  # timeline redraws while compressing; the first and last segment always show
ANSWER_REFRESH_S = 0.08
API_REFRESH_S = 0.5
KEY_FRAMES = 6
MOST_CHANGED = 5
NOT_UPLOADED = ("This server only analyses videos uploaded to it (or its examples): please upload the file "
                "through the page or the API's file upload.")
MALLOC_SETTINGS = {  # environment variable: (mallopt option, value)
    "MALLOC_ARENA_MAX": (-8, 2),  # M_ARENA_MAX
    "MALLOC_MMAP_THRESHOLD_": (-3, 2**20),  # M_MMAP_THRESHOLD: 1 MiB
    "MALLOC_TRIM_THRESHOLD_": (-1, 4 * 2**20),  # M_TRIM_THRESHOLD: 4 MiB
}
FONTS = ["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]
# Clicks on a filmstrip thumbnail or on the timeline pick a segment: the picker's value becomes
# {"segment": i, "click": n} (a new value each click, so the same segment twice is two changes).
PICKER_JS = """
let clicks = 0;
const pick = (index) => { if (Number.isInteger(index)) props.value = {segment: index, click: ++clicks}; };
document.addEventListener('click', (event) => {
  const cell = event.target.closest('#tempo-filmstrip [data-segment]');
  if (cell) pick(Number(cell.dataset.segment));
});
const bound = new WeakSet();
const bind = () => document.querySelectorAll('#tempo-timeline .js-plotly-plot').forEach((plot) => {
  if (bound.has(plot) || typeof plot.on !== 'function') return;
  bound.add(plot);
  plot.on('plotly_click', (data) => { const point = data.points && data.points[0];
                                      if (point && point.customdata) pick(Number(point.customdata[3])); });
});
new MutationObserver(bind).observe(document.body, {childList: true, subtree: true});
bind();
"""


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

    def widget(self, **overrides) -> gr.components.Component:
        options = dict(label=self.label, info=self.info, value=self.default) | overrides
        if self.choices is None:
            return gr.Slider(self.minimum, self.maximum, step=self.step, **options)
        choices = [(label, value) for value, label in self.choices.items()]
        return gr.Radio(choices, **options) if len(choices) <= 3 else gr.Dropdown(choices, **options)

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


def settings(model: tempo.TempoModel) -> dict[str, Setting]:
    """The advanced settings in API order; defaults are the library's (tempo.config) and the checkpoint's."""
    spec, sampling, allocation, generation = model.spec, SamplingConfig(), AllocationConfig(), GenerationConfig()
    found = [
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
    return {setting.name: setting for setting in found}


SETTING_NAMES = ("max_frames", "budget", "k_min", "strategy", "truncation", "temperature", "max_new_tokens")
COMPARED = ("strategy", "budget", "k_min", "truncation")  # what the second allocation of a comparison may change
OTHER_DEFAULTS = {"strategy": {"value": "uniform"}}  # ATA against a uniform share: the paper's comparison


def chosen(arguments: dict[str, object]) -> dict[str, object]:
    """The settings among a handler's arguments (`chosen(locals())`): handlers name each one, for the API."""
    return {name: arguments[name] for name in SETTING_NAMES}


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
    checked = {name: setting.check(values[name]) for name, setting in server.settings.items()}
    return tempo.RunConfig(
        sampling=SamplingConfig(max_frames=_whole(checked["max_frames"], "Max frames")),
        allocation=AllocationConfig(budget=_whole(checked["budget"], "The budget"),
                                    k_min=_whole(checked["k_min"], "k_min"),
                                    strategy="off" if no_compression else checked["strategy"],
                                    truncation=checked["truncation"]),
        generation=GenerationConfig(max_new_tokens=_whole(checked["max_new_tokens"], "Max new tokens"),
                                    temperature=float(checked["temperature"])),
        limits=server.limits)


def other_config(server: Server, config: tempo.RunConfig, strategy: str, budget: float, k_min: float,
                 truncation: str) -> tempo.RunConfig:
    """`config` with a comparison's other allocation settings."""
    checked = {name: server.settings[name].check(value)
               for name, value in zip(COMPARED, (strategy, budget, k_min, truncation))}
    return replace(config, allocation=replace(config.allocation, strategy=checked["strategy"],
                                              budget=_whole(checked["budget"], "The budget"),
                                              k_min=_whole(checked["k_min"], "k_min"),
                                              truncation=checked["truncation"]))


def label(config: tempo.RunConfig) -> str:
    """A comparison side's name, e.g. "ata · 1,024 tokens · head"."""
    allocation = config.allocation
    if allocation.strategy == "off":
        return "no compression"
    return f"{allocation.strategy} · {allocation.budget:,} tokens · k_min {allocation.k_min} · {allocation.truncation}"


# ------------------------------------------------------------------------------------------------ the model's work

def gpu_seconds(video: str, question: str, config: tempo.RunConfig, *other: object, answers: int = 1) -> int:
    """ZeroGPU reservation for one request: start-up plus time per sampled frame (Tempo-6B on one GPU), plus a
    few seconds per answer beyond the first (a comparison's second, a budget sweep's)."""
    return int(20 + 0.08 * config.sampling.max_frames + 8 * (answers - 1))


class UploadCache(tempo.VideoCache):
    """The per-video cache, knowing that Gradio stores each upload under the SHA-256 of its content: uploading the
    same file again (as every API call does) rewrites the same path with a new modification time, and is still
    the same video."""

    def __init__(self, max_bytes: int, uploads: Path):
        super().__init__(max_bytes)
        self.uploads = uploads

    def key(self, path: str | os.PathLike, sampling: SamplingConfig) -> tempo.cache.VideoKey:
        key = super().key(path, sampling)
        real = Path(key.path)
        if real.parent.parent == self.uploads and len(real.parent.name) == 64:  # uploads/<sha256>/<name>
            return key._replace(mtime_ns=0)
        return key


def run_on_device(model: tempo.TempoModel, cache: tempo.VideoCache, video: str, question: str,
                  config: tempo.RunConfig) -> Iterator[tempo.events.Event]:
    """One request's events. On ZeroGPU this runs in a GPU worker: what it yields is a picklable CPU object."""
    yield from tempo.run(model, video, question, config, cache)


def compare_on_device(model: tempo.TempoModel, cache: tempo.VideoCache, video: str, question: str,
                      config: tempo.RunConfig, other: tempo.RunConfig) -> tuple[tempo.Finished, tempo.Finished]:
    """Both allocations of one compression, answered."""
    compressed = analysis.compression(model, video, question, config, cache)
    return analysis.reanswer(model, compressed, config), analysis.reanswer(model, compressed, other)


def sweep_on_device(model: tempo.TempoModel, cache: tempo.VideoCache, video: str, question: str,
                    config: tempo.RunConfig) -> list[tempo.Finished]:
    """`config`'s strategy at a range of budgets, each answered."""
    return analysis.budget_sweep(model, analysis.compression(model, video, question, config, cache), config)


def relevance_on_device(model: tempo.TempoModel, cache: tempo.VideoCache, video: str, question: str,
                        config: tempo.RunConfig) -> list[float]:
    return analysis.compression(model, video, question, config, cache).relevance


class Server:
    """What every handler needs: the model, the request limits, the per-video cache and where visitors' files are."""

    def __init__(self, model: tempo.TempoModel, limits: tempo.Limits):
        self.model = model
        self.limits = limits
        uploads = Path(get_upload_folder()).resolve()
        self.cache = UploadCache(CACHE_BYTES, uploads)
        self.settings = settings(model)
        self.examples = load_examples()
        # Files a visitor may name: this server's uploads and the shipped examples, symlinks resolved.
        self.visitor_folders = (uploads, EXAMPLES_FILE.parent.resolve())
        # A ZeroGPU Space runs the model's work under spaces.GPU (decorated at start-up, as ZeroGPU requires);
        # elsewhere spaces.GPU hands the functions back as they are.
        def on_device(work: Callable, answers: int = 1) -> Callable:
            duration = functools.partial(gpu_seconds, answers=answers)
            return spaces.GPU(duration=duration)(functools.partial(work, model, self.cache))

        self.run = on_device(run_on_device)
        self.compare = on_device(compare_on_device, answers=2)
        self.sweep = on_device(sweep_on_device, answers=analysis.SWEEP_BUDGETS)
        self.relevance = on_device(relevance_on_device)

    def truth(self, video: str, question: str, result: tempo.Finished | None = None) -> share.Truth | None:
        """The ground truth when the request is one of the shipped examples (same file name and question)."""
        for entry in self.examples:
            if Path(entry["video"]).name == Path(video).name and entry["question"].strip() == question.strip():
                evidence = tuple(tuple(span) for span in entry["evidence"])
                correct = False
                if result is not None:
                    known = Question(entry["family"], entry["question"], entry["expected"], evidence)
                    segment_seconds = SamplingConfig().segment_frames / result.video.real_fps
                    correct = is_correct(known, result.answer, segment_seconds)
                return share.Truth(entry["expected"], evidence, correct)
        return None


def load_examples() -> list[dict]:
    """examples/examples.json: [{"video", "question", "label", "family", "expected", "evidence"}], keeping the
    entries whose video is present."""
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


def refused(handler: Callable) -> Callable:
    """Turn any exception of `handler` into the visitor's message (`refusal`)."""
    @functools.wraps(handler)
    def wrapped(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except gr.Error:
            raise
        except Exception as exc:
            raise refusal(exc) from None
    return wrapped


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

    Outputs: status, timeline, answer, key frames, stats, JSON, CSV and HTML report downloads, filmstrip, the
    expected answer (examples only)."""
    values = chosen(locals())
    skip, hidden = gr.skip(), gr.DownloadButton(visible=False)
    progress, frames, workdir, shown = report.RunProgress(), [], None, 0.0
    yield (page.status_html(progress), plots.progress_figure(progress), "", None, "", hidden, hidden, hidden, "", "")
    try:
        config = run_config(server, values, bool(no_compression))
        path = visitor_video(server, video)
        truth = server.truth(path, question)
        evidence = truth.evidence if truth else ()
        for event in server.run(path, question, config):
            progress.update(event)
            now = time.perf_counter()
            timeline = (page.status_html(progress), plots.progress_figure(progress, evidence))
            if isinstance(event, tempo.SegmentCompressed):
                frames.append(event.frame)
                if len(frames) == 1 or len(frames) == event.num_segments or now - shown > SEGMENT_REFRESH_S:
                    shown = now
                    yield (*timeline, *[skip] * 8)
            elif isinstance(event, tempo.AllocationDone):
                yield (*timeline, *[skip] * 8)
            elif isinstance(event, tempo.AnswerToken) and now - shown > ANSWER_REFRESH_S:
                shown = now
                yield (skip, skip, progress.answer, *[skip] * 7)
            elif isinstance(event, tempo.Finished):
                # A folder per request, deleted (finally) once Gradio has copied the files into its cache.
                workdir = tempfile.mkdtemp(prefix="tempo-app-")
                json_path, csv_path = report.export(event, workdir)
                key_frames = report.key_frames(event.segments, frames, KEY_FRAMES)
                graded = server.truth(path, question, event)
                report_path = Path(workdir, "tempo-report.html")
                report_path.write_text(share.html_report(event, question, key_frames, model=server.model.spec.name,
                                                         truth=graded), encoding="utf-8")
                allocation = progress.allocation
                yield (*timeline, report.answer_text(event.answer), key_frames,
                       page.stats_html(event, allocation.context_truncated),
                       gr.DownloadButton(value=str(json_path), visible=True),
                       gr.DownloadButton(value=str(csv_path), visible=True),
                       gr.DownloadButton(value=str(report_path), visible=True),
                       share.filmstrip_html(event.segments, frames, allocation.k_min, allocation.k_max),
                       page.truth_html(graded))
    except Exception as exc:
        error = refusal(exc)
        yield (page.status_html(progress, error=error.message), *[skip] * 9)
        raise error from None
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def answer_api(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
               strategy: str, truncation: str, temperature: float, max_new_tokens: float) -> Iterator[dict]:
    """JSON for API clients, streamed: partial while compressing (see `stage`), the full result at the end
    (with `truth`, the expected answer, for the shipped examples)."""
    values = chosen(locals())
    progress, shown = report.RunProgress(), 0.0
    try:
        config = run_config(server, values)
        path = visitor_video(server, video)
        for event in server.run(path, question, config):
            progress.update(event)
            first = isinstance(event, tempo.SegmentCompressed) and len(progress.segments) == 1
            milestone = isinstance(event, (tempo.AllocationDone, tempo.Finished))
            if first or milestone or time.perf_counter() - shown > API_REFRESH_S:
                shown = time.perf_counter()
                result = progress.to_dict()
                truth = server.truth(path, question, event) if isinstance(event, tempo.Finished) else None
                yield result | ({"truth": truth_dict(truth)} if truth else {})
    except Exception as exc:
        raise refusal(exc) from None


def truth_dict(truth: share.Truth) -> dict:
    return {"expected": truth.expected, "evidence": [list(span) for span in truth.evidence], "correct": truth.correct}


def compared(server: Server, video: object, question: str, values: dict[str, object],
             other: tuple) -> tuple[str, tempo.RunConfig, tempo.RunConfig, tempo.Finished, tempo.Finished]:
    """Both sides of a comparison: the run's settings and `other` (strategy, budget, k_min, truncation)."""
    config = run_config(server, values)
    other_run = other_config(server, config, *other)
    path = visitor_video(server, video)
    first, second = server.compare(path, question, config, other_run)
    return path, config, other_run, first, second


@refused
def compare_view(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
                 strategy: str, truncation: str, temperature: float, max_new_tokens: float, other_strategy: str,
                 other_budget: float, other_k_min: float, other_truncation: str) -> tuple:
    """The Compare tab: both timelines and answers, what changed most, and a summary."""
    values = chosen(locals())
    path, config, other, first, second = compared(server, video, question, values,
                                                  (other_strategy, other_budget, other_k_min, other_truncation))
    truth = server.truth(path, question)
    evidence = truth.evidence if truth else ()
    before, after = [s.tokens for s in first.segments], [s.tokens for s in second.segments]
    changed = analysis.most_changed(before, after, MOST_CHANGED)
    labels = (label(config), label(other))
    changes = plots.comparison_figure(second.segments, before, after, duration=second.video.duration,
                                      k_max=second.k_max, labels=labels, highlight=changed)
    first_answer, second_answer = (gr.Textbox(value=report.answer_text(result.answer), label=name)
                                   for result, name in zip((first, second), labels))
    return (plots.result_figure(first, evidence), first_answer, plots.result_figure(second, evidence), second_answer,
            changes, page.comparison_html(first, second, labels, changed))


@refused
def compare_api(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
                strategy: str, truncation: str, temperature: float, max_new_tokens: float, other_strategy: str,
                other_budget: float, other_k_min: float, other_truncation: str) -> dict:
    """Two allocations of one compression: {"first", "second"} (each as /answer's result), the tokens each segment
    gained or lost, and the segments that changed most."""
    values = chosen(locals())
    *_, first, second = compared(server, video, question, values,
                                 (other_strategy, other_budget, other_k_min, other_truncation))
    before, after = [s.tokens for s in first.segments], [s.tokens for s in second.segments]
    return {"first": first.to_dict(), "second": second.to_dict(),
            "token_changes": analysis.token_changes(before, after),
            "most_changed": analysis.most_changed(before, after, MOST_CHANGED)}


def swept(server: Server, video: object, question: str, values: dict[str, object]) -> list[tempo.Finished]:
    config = run_config(server, values)
    return server.sweep(visitor_video(server, video), question, config)


@refused
def sweep_view(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
               strategy: str, truncation: str, temperature: float, max_new_tokens: float) -> tuple:
    """The Budget sweep tab: tokens per segment at each budget as a heatmap, and the answer at each budget."""
    values = chosen(locals())
    sweep = swept(server, video, question, values)
    last = sweep[-1]
    figure = plots.sweep_figure(last.segments, sweep, duration=last.video.duration, k_max=last.k_max)
    rows = [[f"{result.budget:,}", f"{result.tokens_used:,}", report.answer_text(result.answer)]
            for result in reversed(sweep)]
    return figure, rows


@refused
def sweep_api(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
              strategy: str, truncation: str, temperature: float, max_new_tokens: float) -> dict:
    """The run's strategy at budgets from one token per segment to every memory token: one /answer-style result
    per budget, smallest first."""
    values = chosen(locals())
    sweep = swept(server, video, question, values)
    return {"budgets": [result.budget for result in sweep], "results": [result.to_dict() for result in sweep]}


@dataclass(frozen=True)
class SegmentLook:
    """One segment as a run saw it: where it is, how relevant, how many tokens it kept, and its frames."""

    index: int
    start: float
    end: float
    relevance: float
    rank: int  # 1 for the most relevant segment
    num_segments: int
    tokens: int
    frames: list[tuple[Any, str]]  # (frame, its time)


def look_at_segment(server: Server, video: object, question: str, values: dict[str, object], index: object,
                    no_compression: bool = False) -> SegmentLook:
    """Segment `index` of a run with these settings: the relevance from the (cached) compression, the allocation
    recomputed from it, the frames decoded again."""
    if isinstance(index, bool) or not isinstance(index, (int, float)) or not float(index).is_integer():
        raise tempo.InputError(f"The segment must be a whole number (got {_shown(index)}).")
    config = run_config(server, values, no_compression)
    path = visitor_video(server, video)
    relevance = server.relevance(path, question, config)
    index = int(index)
    if not 0 <= index < len(relevance):
        raise tempo.InputError(f"This video has segments 0 to {len(relevance) - 1} (got {index}).")
    plan = analysis.sampling_plan(path, config)
    allocation = config.allocation
    tokens = allocate(relevance, allocation.budget, allocation.k_min, server.model.spec.num_memory_tokens,
                      allocation.strategy, allocation.seed)
    shown = analysis.segment_frames(path, plan, index)
    return SegmentLook(index, *plan.span(index), relevance[index], analysis.relevance_ranks(relevance)[index],
                       len(relevance), tokens[index],
                       [(frame, report.clock(t)) for frame, t in zip(shown.frames, shown.times)])


@refused
def segment_view(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
                 strategy: str, truncation: str, temperature: float, max_new_tokens: float, no_compression: bool,
                 picked: object) -> tuple:
    """A click on the filmstrip or the timeline: that segment's card and frames, in the Segment tab."""
    if not isinstance(picked, dict) or "segment" not in picked:
        return gr.skip(), gr.skip(), gr.skip()
    look = look_at_segment(server, video, question, chosen(locals()), picked["segment"], bool(no_compression))
    card = page.segment_html(look.index, look.start, look.end, look.relevance, look.rank, look.num_segments,
                             look.tokens, server.model.spec.num_memory_tokens)
    return card, look.frames, gr.Tabs(selected="segment")


@refused
def segment_api(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
                strategy: str, truncation: str, temperature: float, max_new_tokens: float,
                segment: float) -> tuple:
    """One segment (0-based): its time, relevance, rank (1 = most relevant) and tokens kept under these
    settings, and its sampled frames."""
    look = look_at_segment(server, video, question, chosen(locals()), segment)
    facts = {"index": look.index, "start": look.start, "end": look.end, "relevance": look.relevance,
             "rank": look.rank, "tokens": look.tokens}
    return facts, look.frames


def report_api(server: Server, video: object, question: str, max_frames: float, budget: float, k_min: float,
               strategy: str, truncation: str, temperature: float, max_new_tokens: float) -> Iterator[str]:
    """The run as one self-contained HTML file (the page's "Report · HTML")."""
    values = chosen(locals())
    workdir = None
    try:
        config = run_config(server, values)
        path = visitor_video(server, video)
        frames, result = [], None
        for event in server.run(path, question, config):
            if isinstance(event, tempo.SegmentCompressed):
                frames.append(event.frame)
            elif isinstance(event, tempo.Finished):
                result = event
        workdir = tempfile.mkdtemp(prefix="tempo-app-")
        target = Path(workdir, "tempo-report.html")
        target.write_text(share.html_report(result, question, report.key_frames(result.segments, frames, KEY_FRAMES),
                                            model=server.model.spec.name,
                                            truth=server.truth(path, question, result)), encoding="utf-8")
        yield str(target)
    except Exception as exc:
        raise refusal(exc) from None
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


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
        gr.HTML(page.header_html(model))
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
                    widgets = [setting.widget() for setting in server.settings.values()]
                    no_compression = gr.Checkbox(label="No compression (baseline: keep every memory token)")
            with gr.Column(scale=5):
                status = gr.HTML()
                plot = gr.Plot(plots.timeline_figure([]), show_label=False, elem_id="tempo-timeline")
                filmstrip = gr.HTML(elem_id="tempo-filmstrip")
                picker = gr.HTML(value={}, html_template="", js_on_load=PICKER_JS, elem_id="tempo-picker")
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3):
                        answer = gr.Textbox(label="Answer", lines=4, max_lines=16, interactive=False,
                                            buttons=["copy"], elem_id="tempo-answer")
                        truth = gr.HTML(elem_id="tempo-truth")
                    with gr.Column(scale=2):
                        stats = gr.HTML()
                        with gr.Row():
                            json_file = gr.DownloadButton("Segments · JSON", visible=False, size="sm")
                            csv_file = gr.DownloadButton("Segments · CSV", visible=False, size="sm")
                            report_file = gr.DownloadButton("Report · HTML", visible=False, size="sm")
                with gr.Tabs(elem_id="tempo-analysis") as tabs:
                    with gr.Tab("Segment", id="segment"):
                        gr.Markdown("Click a segment on the timeline or the filmstrip to see every frame it sampled.")
                        segment_card = gr.HTML(elem_id="tempo-segment")
                        segment_frames = gr.Gallery(show_label=False, columns=8, object_fit="contain", height=200,
                                                    format="jpeg", elem_id="tempo-segment-frames")
                    with gr.Tab("Compare", id="compare"):
                        gr.Markdown("Another allocation of the same compression, beside this one (nothing is "
                                    "compressed again).")
                        with gr.Row():
                            others = [server.settings[name].widget(label=f"Other {server.settings[name].label}",
                                                                   info=None, **OTHER_DEFAULTS.get(name, {}))
                                      for name in COMPARED]
                        compare_button = gr.Button("Compare", elem_id="tempo-compare-button")
                        compare_summary = gr.HTML(elem_id="tempo-compare-summary")
                        with gr.Row(equal_height=False):
                            with gr.Column():
                                first_plot = gr.Plot(show_label=False, elem_id="tempo-compare-first")
                                first_answer = gr.Textbox(label="This run", interactive=False, lines=2,
                                                          elem_id="tempo-compare-first-answer")
                            with gr.Column():
                                second_plot = gr.Plot(show_label=False, elem_id="tempo-compare-second")
                                second_answer = gr.Textbox(label="The other", interactive=False, lines=2,
                                                           elem_id="tempo-compare-second-answer")
                        changes_plot = gr.Plot(show_label=False, elem_id="tempo-compare-changes")
                    with gr.Tab("Budget sweep", id="sweep"):
                        gr.Markdown("The same compression allocated at budgets from one token per segment to every "
                                    "memory token, and the answer at each.")
                        sweep_button = gr.Button("Run the sweep", elem_id="tempo-sweep-button")
                        with gr.Row(equal_height=False):
                            sweep_plot = gr.Plot(show_label=False, elem_id="tempo-sweep", scale=3)
                            sweep_answers = gr.Dataframe(headers=["budget", "tokens used", "answer"],
                                                         interactive=False, wrap=True, scale=2,
                                                         elem_id="tempo-sweep-answers")
                gallery = gr.Gallery(label="Key frames: the segments that kept the most tokens", columns=3,
                                     object_fit="cover", format="jpeg", fit_columns=False, elem_id="tempo-gallery")

        strategy = widgets[list(server.settings).index("strategy")]
        run_inputs = [upload, question, *widgets]
        # Handlers get the raw request values (preprocess=False) and check them themselves: which file may be
        # opened, and settings named in the messages.
        private = dict(api_visibility="private", preprocess=False)
        upload.change(bound(show_preview, server), upload, video, concurrency_id="preview", concurrency_limit=2,
                      show_progress="minimal", **private)
        no_compression.change(lambda off: gr.Dropdown(interactive=not off), no_compression, strategy,
                              api_visibility="private", queue=False)
        gr.on([run_button.click, question.submit], bound(analyze, server), inputs=[*run_inputs, no_compression],
              outputs=[status, plot, answer, gallery, stats, json_file, csv_file, report_file, filmstrip, truth],
              api_name="analyze", concurrency_id="model", show_progress="hidden", preprocess=False)
        picker.change(bound(segment_view, server), [*run_inputs, no_compression, picker],
                      [segment_card, segment_frames, tabs], concurrency_id="model", **private)
        compare_button.click(bound(compare_view, server), [*run_inputs, *others],
                             [first_plot, first_answer, second_plot, second_answer, changes_plot, compare_summary],
                             concurrency_id="model", **private)
        sweep_button.click(bound(sweep_view, server), run_inputs, [sweep_plot, sweep_answers],
                           concurrency_id="model", **private)
        # The API's own endpoints: the same work, as JSON (and files), for gradio_client.
        api_result = gr.JSON(visible=False)
        api_file = gr.File(visible=False)
        api_frames = gr.Gallery(visible=False)
        segment_number = gr.Number(visible=False, precision=0)
        api = dict(concurrency_id="model", preprocess=False)
        gr.Button(visible=False).click(bound(answer_api, server), run_inputs, api_result, api_name="answer", **api)
        gr.Button(visible=False).click(bound(compare_api, server), [*run_inputs, *others], api_result,
                                       api_name="compare", **api)
        gr.Button(visible=False).click(bound(sweep_api, server), run_inputs, api_result, api_name="sweep", **api)
        gr.Button(visible=False).click(bound(segment_api, server), [*run_inputs, segment_number],
                                       [api_result, api_frames], api_name="segment", **api)
        gr.Button(visible=False).click(bound(report_api, server), run_inputs, api_file, api_name="report", **api)
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
