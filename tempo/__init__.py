"""Tempo: query-aware long-video compression with a small VLM, and the answer a decoder gives from it."""

from .config import AllocationConfig, GenerationConfig, Limits, RunConfig, SamplingConfig
from .engine import VideoCache, answer, run
from .errors import InputError, ModelError, ResourceError, TempoError, VideoError
from .events import AllocationDone, AnswerToken, Finished, SegmentCompressed, VideoProbed
from .model import DEFAULT_MODEL, TempoModel, from_pretrained
from .model.prompts import Exchange

__all__ = [
    "AllocationConfig", "GenerationConfig", "Limits", "RunConfig", "SamplingConfig",
    "InputError", "ModelError", "ResourceError", "TempoError", "VideoError",
    "AllocationDone", "AnswerToken", "Finished", "SegmentCompressed", "VideoProbed",
    "DEFAULT_MODEL", "Exchange", "TempoModel", "VideoCache", "from_pretrained", "answer", "run",
]
