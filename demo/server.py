"""What every request needs, and the work the page and the API share: the model and the limits, the per-video
cache (kept in this process, whatever runs the model), which files a visitor may open, the shipped examples and
their truth, a request's settings made into a RunConfig, and the work on it: an answer, a comparison and a budget
sweep (each one trip to the accelerator, which compresses only what the cache does not hold) and one segment (no
trip at all once the question was asked)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gradio.utils import get_upload_folder

from tempo import analysis
from tempo.analysis import SegmentFrames
from tempo.config import Limits, RunConfig, SamplingConfig, Strategy
from tempo.engine import Answers, Request, VideoCache, check_file, checked, serve
from tempo.errors import InputError, TempoError
from tempo.events import Compressed, Compression, Event, Finished
from tempo.model import TempoModel
from tempo.render.report import Asked, Truth, write_report
from tempo.settings import with_settings
from tempo.synthetic import Question, is_correct
from tempo.times import quoted, seconds_given
from tempo.video.clip import Clip, cut_clip

from .device import Device, on_device
from .handover import handed_over

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_FILE = ROOT / "examples" / "examples.json"
MOST_CHANGED = 5
NOT_UPLOADED = ("This server only analyses videos uploaded to it: please upload the file through the page or the "
                "API's file upload.")


@dataclass(frozen=True)
class Example:
    """A shipped example: its video, question and label, and what the model should answer and where that is."""

    video: str
    question: str
    label: str
    family: str
    expected: str
    evidence: tuple[tuple[float, float], ...]

    def graded(self, finished: Finished, sampling: SamplingConfig) -> bool:
        """Whether `finished` answered right, graded as the evaluation grades (a "when" within one segment's length
        of the run's own sampling)."""
        return is_correct(Question(self.family, self.question, self.expected, self.evidence), finished.answer,
                          sampling.segment_frames / finished.video.real_fps)


def load_examples() -> list[Example]:
    """examples/examples.json, keeping the entries whose video is present."""
    if not EXAMPLES_FILE.is_file():
        return []
    entries = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
    return [Example(str(EXAMPLES_FILE.parent / e["video"]), e["question"], e.get("label") or e["question"],
                    e["family"], e["expected"], tuple(tuple(span) for span in e["evidence"]))
            for e in entries if (EXAMPLES_FILE.parent / e["video"]).is_file()]


@dataclass(frozen=True)
class Comparison:
    """Two allocations of one compression, answered, and how their tokens differ per segment."""

    first: Finished
    second: Finished
    labels: tuple[str, str]
    token_changes: list[int]
    most_changed: list[int]


def label(config: RunConfig, budget: int) -> str:
    """A run's allocation in a few words, e.g. "ata · 1,024 tokens · k_min 4 · head" (`budget`: the one in effect,
    the checkpoint's where the config leaves it open)."""
    allocation = config.allocation
    if allocation.strategy == Strategy.OFF:
        return "every memory token"
    return f"{allocation.strategy} · {budget:,} tokens · k_min {allocation.k_min} · {allocation.truncation}"


class Pace:
    """Seconds per segment of this server's recent uncached runs (a moving average), for up-front estimates."""

    weight = 0.5  # of the newest run

    def __init__(self) -> None:
        self.per_segment: float | None = None
        self._lock = threading.Lock()

    def record(self, finished: Finished) -> None:
        if not finished.segments:
            return
        seconds = finished.timings.get("total", 0.0) / len(finished.segments)
        with self._lock:
            old = self.per_segment
            self.per_segment = seconds if old is None else self.weight * seconds + (1 - self.weight) * old

    def estimate(self, num_segments: int) -> float | None:
        """Seconds a video of `num_segments` should take here, once one run has been measured."""
        return None if self.per_segment is None else self.per_segment * num_segments


class Server:
    """The model, the request limits, the per-video cache, the examples and where visitors' files are."""

    def __init__(self, model: TempoModel, limits: Limits):
        self.model = model
        self.limits = limits
        self.uploads = uploads = Path(get_upload_folder()).resolve()
        self.cache = VideoCache(limits.cache_mb * 2**20, limits.cache_questions, content_named=uploads)  # SERVER rows
        self.examples = load_examples()
        # Files a visitor may name: this server's uploads and the shipped examples, symlinks resolved.
        self.visitor_folders = (uploads, EXAMPLES_FILE.parent.resolve())
        self.device: Device = on_device(model)
        self.pace = Pace()
        self.handed: set[str] = set()  # videos tools were handed (fetched or decoded), deleted with the uploads

    def handed_video(self, video: object) -> str:
        """The file a tool call names (see `handover`), fetched or written into the uploads where needed, then
        checked as `visitor_video` checks an upload."""
        path = self.visitor_video(handed_over(video, self.uploads, self.limits))
        if Path(path).is_relative_to(self.uploads):  # never a shipped example
            self.handed.add(path)
        return path

    def visitor_video(self, payload: object) -> str:
        """The file a request names, if it is one this server may open: an upload or an example, after resolving
        symlinks. Anything else gets one message, whether or not the path exists, so nothing about the server's
        files leaks out."""
        path: Any = payload.get("path") if isinstance(payload, dict) else payload  # os.fspath refuses a non-path
        if not path:
            raise InputError("Please upload a video (or pick an example) first.")
        try:
            real = Path(os.fspath(path)).resolve()
        except (TypeError, ValueError, OSError):
            raise InputError(NOT_UPLOADED) from None
        if not any(real.is_relative_to(folder) for folder in self.visitor_folders) or not real.is_file():
            raise InputError(NOT_UPLOADED)
        return str(real)

    def request(self, video: object, question: str, values: Mapping[str, object],
                every_token: bool = False) -> Request:
        """A request's raw values checked (settings by the table, the question, then the file by `visitor_video`)
        and made the engine's Request (one answer); `every_token` keeps every memory token whatever the strategy
        says."""
        config = with_settings(RunConfig(limits=self.limits), values, self.model.spec)
        if every_token:
            config = with_settings(config, {"strategy": Strategy.OFF.value})
        config, question = checked(self.model, question, config)
        return Request(self.visitor_video(video), question, config)

    def example(self, request: Request) -> Example | None:
        """The shipped example `request` asks (its video and question), if it is one."""
        name = Path(request.video).name
        return next((e for e in self.examples
                     if Path(e.video).name == name and e.question.strip() == request.question.strip()), None)

    def evidence(self, request: Request) -> tuple[tuple[float, float], ...]:
        """Where a shipped example's answer is in its video; nothing for any other request."""
        example = self.example(request)
        return example.evidence if example else ()

    def truth(self, request: Request, finished: Finished | None = None) -> Truth | None:
        """For a shipped example: the expected answer, its evidence, and whether `finished` got it right."""
        example = self.example(request)
        if example is None:
            return None
        correct = finished is not None and example.graded(finished, request.config.sampling)
        return Truth(example.expected, example.evidence, correct)

    # ---------------------------------------------------------------------------------------------- the work

    def run(self, request: Request, answers: Answers = Answers.ONE,
            compared_with: RunConfig | None = None) -> Generator[Event, None, None]:
        """`request` through the model: its events (`Compressed` among them), then the `answers` asked for (default:
        one, under the request's own config)."""
        asked = replace(request, answers=answers, compared_with=compared_with)
        return serve(self.model, asked, self.cache, self.device.accelerate, self.device.remote)

    def write_report(self, asked: Sequence[Asked], path: str | os.PathLike) -> Path:
        """Finished runs on one video (a conversation's turns) as one offline HTML file."""
        return write_report(asked, path, model=self.model.spec.name)

    def clip(self, video: object, start: object, end: object, folder: Path) -> Clip:
        """[`start`, `end`) (seconds, or m:ss) of a file a visitor may open, cut into `folder` as an mp4 (its
        headers checked against the limits first; its length capped by them)."""
        path = self.visitor_video(video)
        first, last = seconds_given(start, "The clip's start"), seconds_given(end, "The clip's end")
        if first is None or last is None:
            raise InputError(f"A clip needs its start and end, in seconds or as m:ss (got {quoted(start)} and "
                             f"{quoted(end)}).")
        check_file(path, self.limits)
        name = f"{Path(path).stem[:60]}-{first:.0f}s-{math.ceil(last)}s.mp4"
        return cut_clip(path, first, last, folder / name, self.limits)

    def compare(self, request: Request, others: Mapping[str, object]) -> Comparison:
        """The request's allocation and another (`others`: the compared settings' values) of one compression."""
        other = with_settings(request.config, others, self.model.spec)
        first, second = results(self.run(request, Answers.COMPARED, other))
        before, after = [s.tokens or 0 for s in first.segments], [s.tokens or 0 for s in second.segments]  # allocated
        return Comparison(first, second, (label(request.config, first.budget), label(other, second.budget)),
                          analysis.token_changes(before, after), analysis.most_changed(before, after, MOST_CHANGED))

    def sweep(self, request: Request) -> list[Finished]:
        """The request's strategy at budgets from one token per segment to every memory token (kept whole at the
        top), one trip."""
        return results(self.run(request, Answers.BUDGETS))

    def compression(self, request: Request, watch: Callable[[Event], object] | None = None) -> Compression:
        """The request's compression: from the cache (no trip to the accelerator) once the question was asked;
        `watch` sees each event on the way."""
        with contextlib.closing(self.run(request, Answers.NONE)) as events:
            for event in events:
                if watch is not None:
                    watch(event)
                if isinstance(event, Compressed):
                    return event.compression
        raise TempoError("The compressor ended without a compression.")

    def segment(self, request: Request, index: object) -> SegmentFrames:
        """Segment `index` (0-based) as this request's run sees it; its frames are decoded again."""
        if isinstance(index, bool) or not isinstance(index, (int, float)) or not float(index).is_integer():
            raise InputError(f"The segment must be a whole number (got {index!r}).")
        compression = self.compression(request)
        return analysis.segment_frames(self.model, request.video, compression.plan, compression.relevance,
                                        request.config, int(index))


def results(items: Iterable[object]) -> list[Finished]:
    """The `Finished` events of a run, in order."""
    return [item for item in items if isinstance(item, Finished)]
