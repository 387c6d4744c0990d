"""What the model does with one grounding query, kept so the metrics can be computed again without it: the
whole video's relevance per segment, zoom's window's, and the decoder's answer to the query asked as an interval.
Each is turned into the predictions of one row of the table: relevance alone, relevance with zoom, the answer."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import RunConfig
from ..engine import VideoCache, compress, reanswer
from ..events import Compression, Segment
from ..model import TempoModel
from ..moments import Moment, answer_interval, asks_interval, find_moments
from .formats import CLIP_SECONDS, Prediction
from .metrics import MAX_INTERVALS

ROWS = ("relevance", "zoom", "answer")  # the table's rows, in order
ROW_NAMES = {"relevance": "relevance alone (compressor only)", "zoom": "relevance with zoom",
             "answer": "the decoder's interval answer"}
INTERVAL_QUESTION = "From when to when does this happen: {query}"  # for queries that do not ask it themselves


@dataclass(frozen=True)
class Observation:
    """One query's run: segments of the whole video and of zoom's window (none where the video is short enough
    to be sampled at the full rate already), the decoder's answer (None when not asked), and the seconds taken."""

    qid: str
    duration: float
    segments: tuple[Segment, ...]
    window: tuple[Segment, ...]
    answer: str | None
    seconds: float

    def to_dict(self) -> dict:
        return {"qid": self.qid, "duration": self.duration, "answer": self.answer, "seconds": round(self.seconds, 2),
                "segments": [_span(s) for s in self.segments], "window": [_span(s) for s in self.window]}

    @classmethod
    def from_dict(cls, record: dict) -> Observation:
        def segments(key: str) -> tuple[Segment, ...]:
            return tuple(Segment(i, s, e, r) for i, (s, e, r) in enumerate(record[key]))
        return cls(str(record["qid"]), float(record["duration"]), segments("segments"), segments("window"),
                   record["answer"], float(record["seconds"]))


def _span(segment: Segment) -> list:
    return [round(segment.start, 3), round(segment.end, 3), segment.relevance]


def segments_of(compression: Compression) -> tuple[Segment, ...]:
    """A compression's segments with their spans and relevance."""
    return tuple(Segment(i, *compression.plan.span(i), score) for i, score in enumerate(compression.relevance))


def interval_question(query: str) -> str:
    """The query as the decoder is asked it: as it is when it asks from when to when, else in a frame that does."""
    return query if asks_interval(query) else INTERVAL_QUESTION.format(query=query)


def observe(model: TempoModel, path: str, qid: str, query: str, config: RunConfig, cache: VideoCache,
            answer: bool = True) -> Observation:
    """Compress the whole video for `query`, then the window zoom would read around its most relevant segment,
    then (with `answer`) answer the interval question from the window, as zoom answers it, or the whole video."""
    started = time.perf_counter()
    whole = compress(model, path, query, config, cache)
    segments = segments_of(whole)
    peak = max(segments, key=lambda s: (s.relevance or 0.0, -s.index))
    span = config.sampling.closer_window((peak.start + peak.end) / 2, whole.video.duration)
    source, source_config = whole, config
    window: tuple[Segment, ...] = ()
    if span is not None:
        source_config = dataclasses.replace(config, sampling=dataclasses.replace(config.sampling, start=span[0],
                                                                                 end=span[1]))
        source = compress(model, path, query, source_config, cache)
        window = segments_of(source)
    said = reanswer(model, source, source_config, question=interval_question(query)).answer if answer else None
    return Observation(qid, whole.video.duration, segments, window, said, time.perf_counter() - started)


def clip_saliency(moments: Sequence[Moment], segments: Sequence[Segment], window: Sequence[Segment],
                  duration: float, clip_seconds: float = CLIP_SECONDS) -> tuple[float, ...]:
    """A saliency score per clip: the clips inside moments first, by the moment's score and then nearest its middle
    (the highlight is a moment's middle), then every other clip by the relevance of the segment holding it (the
    window's inside the window)."""
    low, high = (window[0].start, window[-1].end) if window else (0.0, 0.0)
    scores = []
    for clip in range(int(duration / clip_seconds)):
        middle = (clip + 0.5) * clip_seconds
        inside = [m for m in moments if m.start <= middle <= m.end]
        if inside:
            scores.append(max(2.0 + m.score - abs(middle - (m.start + m.end) / 2) / duration / 1e3 for m in inside))
            continue
        source = window if window and low <= middle <= high else segments
        holder = min(source, key=lambda s: max(s.start - middle, 0.0, middle - s.end))
        scores.append(holder.relevance or 0.0)
    return tuple(scores)


def predictions(observation: Observation) -> dict[str, Prediction]:
    """The observation as each row's prediction: ranked moments (without and with zoom's window) with clip
    saliency, and the decoder's interval (nothing when its answer names no interval)."""
    o = observation
    ranked = {"relevance": find_moments(o.segments, count=MAX_INTERVALS),
              "zoom": find_moments(o.segments, o.window, count=MAX_INTERVALS)}
    rows = {row: Prediction(o.qid, tuple((m.start, m.end, m.score) for m in moments),
                            clip_saliency(moments, o.segments, o.window if row == "zoom" else (), o.duration))
            for row, moments in ranked.items()}
    interval = answer_interval(o.answer) if o.answer is not None else None
    rows["answer"] = Prediction(o.qid, () if interval is None else ((*interval, 1.0),))
    return rows
