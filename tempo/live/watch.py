"""A standing question over a stream: frames sampled at 2 fps, every 8 make a segment, and each segment goes through
the vision tower and the compressor with the standing question as soon as it is complete, through the engine's
own steps. Its relevance is judged by the alert rule, its memory joins the recent memories that "Ask now" answers
from with ATA and the decoder, and its frames join a replay buffer. Everything kept has a cap; `close` frees it."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..config import Limits, RunConfig, SamplingConfig
from ..engine import check_question
from ..engine.steps import Dialogue, compress_batch, encode_batch, out_of_memory_as_error, respond
from ..events import Event, Segment
from ..model import TempoModel
from ..timing import Timer
from ..video.segments import prepare_segment
from .alerts import Alerting, AlertRule
from .errors import StreamError
from .events import Alert, Gap, LiveEvent, SegmentWatched, WatchEnded, WatchStarted
from .feed import Feed, Frame, Sampler, rgb
from .memory import RecentMemories, Remembered, Replay, segment_plan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveConfig:
    """How a stream is watched: the sampling (as for files), the alert rule, and the caps on what is kept."""

    fps: float = 2.0
    segment_frames: int = 8
    long_edge: int = 512
    recent_s: float = 600.0  # memories "Ask now" answers from: the last ten minutes ...
    max_frames: int = 1024  # ... and never more than the frame cap's worth of segments
    replay_s: float = 300.0  # frames kept to watch again
    rule: AlertRule = field(default_factory=AlertRule)
    stall_s: float = 20.0  # a source that sends nothing for this long has died
    max_behind_s: float = 8.0  # a frame later than this (two segments) is skipped, so the lag stays bounded
    max_pixels: float = Limits().max_frame_pixels

    @property
    def recent_segments(self) -> int:
        frames = min(self.recent_s * self.fps, self.max_frames)
        return max(1, int(frames // self.segment_frames))


class LiveWatch:
    """One standing question over one stream. Frames come in pushed (`push`, a camera's) or read from a source
    (`follow`); each yields the watch's events. Safe to `ask` and `replay` from another thread meanwhile."""

    def __init__(self, model: TempoModel, question: str, config: LiveConfig | None = None, source: str = "",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model, self.config, self.source, self.clock = model, config or LiveConfig(), source, clock
        self.query = check_question(question, Limits().max_question_chars)
        self.sampling = SamplingConfig(fps=self.config.fps, long_edge=self.config.long_edge,
                                       segment_frames=self.config.segment_frames)
        self.recent = RecentMemories(self.config.recent_segments)
        self.replay = Replay(self.config.replay_s)
        self.alerting = Alerting(self.config.rule)
        self.sampler = Sampler(self.config.fps)
        self.pending: list[tuple[float, np.ndarray]] = []
        self.timer = Timer()
        self.segments = self.alerts = 0
        self.size = (0, 0)  # the sampled frames' width and height
        self.started_at = time.time()
        self.origin: float | None = None  # the clock's reading at stream time 0, where the stream is in real time
        self.behind: float | None = None  # where frames started being skipped to catch up
        # On CUDA one segment or one answer uses the model at a time (the decoder replays graphs on its own
        # buffers); on a CPU the two run side by side, so an answer does not hold the segments up.
        self.model_lock = threading.Lock() if model.device.type == "cuda" else contextlib.nullcontext()

    # ------------------------------------------------------------------------------------------ frames in

    def start(self) -> WatchStarted:
        self.started_at = time.time()
        return WatchStarted(self.source, self.query, self.started_at, self.config.fps, self.config.segment_frames)

    def push(self, t: float, frame: Frame) -> list[LiveEvent]:
        """A frame taken `t` seconds into the stream, at any rate (a camera's): sampled, then `add`ed."""
        if self.origin is None:
            self.origin = self.clock() - t
        config = self.config
        return [event for tick, chosen in self.sampler.add(t, frame)
                for event in self.add(tick, rgb(chosen, config.long_edge, config.max_pixels))]

    def add(self, t: float, frame: np.ndarray) -> list[LiveEvent]:
        """A sampled frame (RGB, long edge fitted) at stream time `t`; the segment it completes, if any, is
        compressed now. A frame that reaches the watch too late is skipped, with the segment it belonged to."""
        events: list[LiveEvent] = []
        late = self.origin is not None and self.clock() - (self.origin + t) > self.config.max_behind_s
        if late:
            if self.behind is None:
                self.behind = self.pending[0][0] if self.pending else t
            self.pending = []
            return events
        if self.behind is not None:
            events.append(Gap(self.behind, t))
            self.behind = None
        self.size = (frame.shape[1], frame.shape[0])
        self.replay.add(t, frame)
        self.pending.append((t, frame))
        if len(self.pending) == self.config.segment_frames:
            events += self.flush()
        return events

    def flush(self) -> list[LiveEvent]:
        """The frames waiting for their segment, compressed as one (a stream's end makes a short last one)."""
        if not self.pending:
            return []
        times, frames = [t for t, _ in self.pending], [f for _, f in self.pending]
        self.pending = []
        plan = segment_plan(times, self.config.fps, self.config.segment_frames)
        with self.model_lock, out_of_memory_as_error():
            # index 0: the segment's own one-segment plan, on the stream's clock, is what its prompt is made from
            prepared = prepare_segment(0, frames, self.sampling, self.model.geometry, self.timer)
            encoded = encode_batch(self.model, [prepared], self.timer)
            memories, batch_relevance = compress_batch(self.model, encoded, self.query, plan, self.timer)
        relevance = float(batch_relevance[0])
        level, rise, alert = self.alerting.judge(relevance)
        start, end = plan.span(0)
        self.recent.add(Remembered(memories[0], relevance, tuple(times)))
        frame_time = times[min(prepared.shown, len(times) - 1)]
        lag = None if self.origin is None else max(0.0, self.clock() - (self.origin + times[-1]))
        segment = Segment(self.segments, start, end, relevance, frame=prepared.thumbnail, frame_time=frame_time)
        self.segments += 1
        watched = SegmentWatched(segment, level, rise, lag, alert)
        if not alert:
            return [watched]
        self.alerts += 1
        return [watched, Alert(segment, rise)]

    def follow(self, frames: Iterable[tuple[float, Frame]], paced: bool = True, speed: float = 1.0,
               stop: threading.Event | None = None) -> Iterator[LiveEvent]:
        """Read a source (any iterable of (seconds, frame)) on a thread of its own until it ends, dies or `stop` is
        set: `WatchStarted`, then the segments as they arrive, then `WatchEnded` with its sentence. `paced`: at the
        pace of the frames' times (`speed` times real time), and the lag is measured; else as fast as it decodes."""
        config = self.config
        stop = stop or threading.Event()
        feed = Feed(frames, config.fps, config.long_edge, config.max_pixels, config.stall_s, paced, speed,
                    self.clock, stop)
        yield self.start()
        reason, failed = "The stream ended.", False
        try:
            for t, frame in feed:
                if paced and self.origin is None:
                    self.origin = feed.origin
                yield from self.add(t, frame)
            if stop.is_set():
                reason = "The watch was stopped."
            else:
                yield from self.flush()
        except StreamError as exc:
            reason, failed = str(exc), True
        finally:
            feed.close()
        yield self.ended(reason, failed)

    def ended(self, reason: str, failed: bool = False) -> WatchEnded:
        """The watch's last event; the recent memories and the replay stay until `close`."""
        log.info("watch of %s ended after %d segments and %d alerts: %s", self.source or "a stream", self.segments,
                 self.alerts, reason)
        self.pending = []
        return WatchEnded(reason, self.segments, self.alerts, failed)

    # ------------------------------------------------------------------------------------------ what was seen

    def ask(self, question: str, config: RunConfig | None = None) -> Iterator[Event]:
        """`question` answered by the decoder over the recent memories, the budget allocated by `config`'s strategy
        (ATA by default): `AllocationDone`, `AnswerToken`s, then `Finished`, whose times are stream times."""
        config = config or RunConfig()
        question = check_question(question, config.limits.max_question_chars)
        compression = self.recent.compression(self.query, self.source, self.config.fps, self.config.segment_frames,
                                              self.size)
        timer = Timer()
        with self.model_lock, out_of_memory_as_error():
            yield from respond(self.model, compression, config, timer, Dialogue(question))

    def close(self) -> None:
        """Free everything the watch keeps."""
        self.recent.clear()
        self.replay.clear()
        self.pending = []


def watch(model: TempoModel, frames: Iterable[tuple[float, Frame]], question: str, config: LiveConfig | None = None,
          paced: bool = True, source: str = "") -> Iterator[LiveEvent]:
    """`question` standing over a source's frames, as events (see `LiveWatch.follow`); everything is freed at the
    end."""
    live = LiveWatch(model, question, config, source)
    try:
        yield from live.follow(frames, paced)
    finally:
        live.close()
