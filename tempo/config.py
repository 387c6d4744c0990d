"""Run-time settings, grouped by pipeline stage. Defaults are the paper's / released inference defaults."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from .allocation import STRATEGIES, TRUNCATIONS
from .errors import InputError


@dataclass(frozen=True)
class SamplingConfig:
    """How frames are taken from the video and grouped into segments."""

    fps: float = 2.0
    max_frames: int = 1024
    min_frames: int = 4
    long_edge: int = 512
    segment_frames: int = 8
    fast_seek: bool = False  # key frames only: much faster on long files, not the released sampling

    def validate(self) -> None:
        if not (isinstance(self.max_frames, int) and self.max_frames >= 1):
            raise InputError(f"max_frames must be a whole number >= 1 (got {self.max_frames!r}).")
        if not (math.isfinite(self.fps) and self.fps > 0):
            raise InputError(f"Sampling fps must be a positive number (got {self.fps!r}).")


@dataclass(frozen=True)
class AllocationConfig:
    """How the visual token budget is shared between segments (ATA or one of the paper's ablations)."""

    budget: int | None = None  # None: the checkpoint's visual_token_budget (8192 for Tempo-6B)
    k_min: int = 4
    strategy: str = "ata"  # one of allocation.STRATEGIES
    truncation: str = "head"  # one of allocation.TRUNCATIONS
    seed: int = 0  # for the "random" strategy

    def validate(self) -> None:
        if not isinstance(self.strategy, str) or self.strategy not in STRATEGIES:
            raise InputError(f"Unknown allocation strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}.")
        if not isinstance(self.truncation, str) or self.truncation not in TRUNCATIONS:
            raise InputError(f"Unknown truncation {self.truncation!r}; choose one of {', '.join(TRUNCATIONS)}.")
        if self.budget is not None and (isinstance(self.budget, bool) or not isinstance(self.budget, int)
                                        or self.budget < 1):
            raise InputError(f"The visual token budget must be a whole number >= 1 (got {self.budget!r}).")
        if isinstance(self.k_min, bool) or not isinstance(self.k_min, int) or self.k_min < 1:
            raise InputError(f"k_min must be a whole number >= 1 (got {self.k_min!r}).")


@dataclass(frozen=True)
class GenerationConfig:
    """Answer decoding: greedy at temperature 0, otherwise temperature / top-p sampling."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0  # for sampling (temperature > 0)

    def validate(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be a whole number >= 1 (got {self.max_new_tokens!r}).")
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature)
                and 0.0 <= self.temperature <= 5.0):
            raise InputError(f"Temperature must be between 0 and 5 (got {self.temperature!r}).")
        if not (isinstance(self.top_p, (int, float)) and 0.0 < self.top_p <= 1.0):
            raise InputError(f"top_p must be in (0, 1] (got {self.top_p!r}).")


@dataclass(frozen=True)
class Limits:
    """Guards checked before any expensive work, so a public demo cannot be tied up by one request."""

    max_question_chars: int = 2000
    max_upload_bytes: int = 2 * 1024**3
    max_duration_s: float = 4 * 3600.0

    @classmethod
    def from_env(cls) -> "Limits":
        """$TEMPO_MAX_QUESTION_CHARS, $TEMPO_MAX_UPLOAD_MB and $TEMPO_MAX_DURATION_MIN override the defaults."""
        default = cls()

        def positive(name: str, fallback: float) -> float:
            text = os.environ.get(name)
            if text is None:
                return fallback
            try:
                value = float(text)
            except ValueError:
                raise InputError(f"{name}={text!r} is not a number.") from None
            if not (math.isfinite(value) and value > 0):
                raise InputError(f"{name} must be a positive number (got {text!r}).")
            return value

        return cls(
            max_question_chars=int(positive("TEMPO_MAX_QUESTION_CHARS", default.max_question_chars)),
            max_upload_bytes=int(positive("TEMPO_MAX_UPLOAD_MB", default.max_upload_bytes / 2**20) * 2**20),
            max_duration_s=positive("TEMPO_MAX_DURATION_MIN", default.max_duration_s / 60) * 60,
        )


@dataclass(frozen=True)
class RunConfig:
    """Everything one question about one video needs besides the model."""

    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    allocation: AllocationConfig = field(default_factory=AllocationConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    limits: Limits = field(default_factory=Limits)
    micro_batch: int = 4
    context_length: int | None = None  # None: the checkpoint's tokenizer_model_max_length

    def summary(self, budget: int) -> dict[str, object]:
        """The settings a user chose, for reports and JSON (`budget`: the one in effect, after defaults)."""
        return {"max_frames": self.sampling.max_frames, "fast_seek": self.sampling.fast_seek, "budget": budget,
                "k_min": self.allocation.k_min, "strategy": self.allocation.strategy,
                "truncation": self.allocation.truncation, "temperature": self.generation.temperature,
                "max_new_tokens": self.generation.max_new_tokens}

    def validate(self) -> None:
        self.sampling.validate()
        self.allocation.validate()
        self.generation.validate()
        if not (isinstance(self.micro_batch, int) and self.micro_batch >= 1):
            raise InputError(f"micro_batch must be a whole number >= 1 (got {self.micro_batch!r}).")
