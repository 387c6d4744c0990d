"""Run-time settings, grouped by the part of the pipeline they tune: frozen dataclasses that hold every default (the
paper's / the released inference defaults). The table of the settings people choose, with their ranges and checks,
is `tempo.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from .allocation import Strategy


class Zoom(str, Enum):
    """When an answer looks closer by itself (coarse to fine): never, for questions about when things happen, or
    always (a setting's value is the choice's; it compares equal)."""

    OFF = "off"
    AUTO = "auto"
    ALWAYS = "always"


@dataclass(frozen=True)
class SamplingConfig:
    """How frames are taken from the video and grouped into segments."""

    fps: float = 2.0
    max_frames: int = 1024
    min_frames: int = 4
    long_edge: int = 512
    segment_frames: int = 8
    fast_seek: bool = False  # intra frames only: much faster on long files, not the released sampling
    start: float | None = None  # seconds: sample only from here (None: the beginning) ...
    end: float | None = None  # ... up to here (None: the end); times stay the video's own

    def stretch(self, duration: float) -> tuple[float, float]:
        """What this samples of a video `duration` seconds long: its range, or the whole video."""
        return self.start or 0.0, duration if self.end is None else min(self.end, duration)

    def closer_window(self, moment: float, duration: float) -> tuple[float, float] | None:
        """The stretch around `moment` that samples at the full rate within the frame cap (max_frames / fps
        seconds), kept inside the stretch sampled; None when that samples at the full rate already."""
        width = self.max_frames / self.fps
        low, high = self.stretch(duration)
        if width >= high - low:
            return None
        start = min(max(low, moment - width / 2), high - width)
        return round(start, 1), round(start + width, 1)


@dataclass(frozen=True)
class AllocationConfig:
    """How the visual token budget is shared between segments (ATA or one of the paper's ablations)."""

    budget: int | None = None  # None: the checkpoint's visual_token_budget (8192 for Tempo-6B)
    k_min: int = 4
    strategy: str = Strategy.ATA.value  # a value of allocation.Strategy
    truncation: str = "head"  # one of allocation.TRUNCATIONS
    seed: int = 0  # for the "random" strategy


@dataclass(frozen=True)
class GenerationConfig:
    """Answer decoding: greedy at temperature 0, otherwise temperature / top-p sampling."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0  # for sampling (temperature > 0)


@dataclass(frozen=True)
class Limits:
    """Guards checked before any expensive work, so a public demo cannot be tied up by one request."""

    max_question_chars: int = 2000
    max_upload_bytes: int = 2 * 1024**3
    max_duration_s: float = 4 * 3600.0
    max_frame_pixels: int = 7680 * 4320  # 8K: what any header claims, and what any decoded frame is
    isolate_decoding: bool = False  # decode in a child process the server can kill (servers turn it on)
    decode_memory_bytes: int = 4 * 1024**3  # that process's data memory
    decode_stall_s: float = 60.0  # that process is stopped when nothing comes out of it for this long
    max_clip_s: float = 300.0  # the longest clip of a moment the server cuts (a clip may be encoded again)
    # What a server keeps, each bounded (the oldest leaves first), and whom a local server answers: the settings
    # table's SERVER rows, read from $TEMPO_<NAME> (tempo.settings.limits_from_env).
    cache_mb: int = 2048  # the per-video cache: decoded frames or vision features, and compressions
    cache_questions: int = 8  # compressions kept per cached video
    uploads_mb: int = 10240  # the upload folder: uploads, videos handed to the tools, previews, files handed out
    sessions: int = 1000  # visitors' sessions whose state (the conversation) stays in memory
    allowed_hosts: str = ""  # names besides localhost a local server (or a Space) answers, comma-separated
    live_recent_min: int = 10  # a live stream's recent memories, which "Ask now" answers from (tempo.live)
    live_replay_min: int = 5  # a live stream's frames kept to watch again
    live_watches: int = 2  # streams watched at once
    live_lab_streams: bool = False  # streams from this machine's private network (never on a Space)
    int8: bool = False  # the model's linear weights held in int8 (tempo.model.int8), chosen when it is loaded


@dataclass(frozen=True)
class RunConfig:
    """Everything one question about one video needs besides the model."""

    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    allocation: AllocationConfig = field(default_factory=AllocationConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    limits: Limits = field(default_factory=Limits)
    micro_batch: int | None = None  # None: where the model runs decides (the settings table's `where`)
    zoom: str = "auto"  # a value of Zoom; auto looks closer for "when" questions (docs/tempo-tiny.md)
    context_length: int | None = None  # None: the checkpoint's tokenizer_model_max_length
