"""The engine: a request from a video file and a question to events, in two halves that a server can run apart.

This face is all that callers use (the app, analysis, batch jobs, the command line, the integrations): the host's
half (`serve`: checks, the per-video cache, the pixels) and the accelerator's (`execute`: vision tower, compressor,
decoder), the `Job` that travels between them, the compression record, the cache, the checks, and the one
out-of-memory rule. `run` and `answer` are a whole request in one process."""

from ..events import Compressed, Compression
from ..video.sandbox import warm_up as warm_up_decoding
from .accelerator import (allocate_tokens, compress_batch, effective_budget, encode_batch, execute, micro_batches,
                          out_of_memory_as_error, respond)
from .cache import EncodedSegment, VideoCache, VideoEntry, VideoKey, default_cache
from .host import (Accelerate, answer, check_duration, check_file, check_question, check_size, checked, open_decoder,
                   run, serve)
from ..model.prompts import Exchange
from .job import Answers, Dialogue, Job

__all__ = [
    "Accelerate", "Answers", "Compressed", "Compression", "Dialogue", "EncodedSegment", "Exchange", "Job",
    "VideoCache", "VideoEntry", "VideoKey", "allocate_tokens", "answer", "check_duration", "check_file", "check_question", "check_size", "checked",
    "compress_batch", "default_cache", "effective_budget", "encode_batch", "execute", "micro_batches",
    "open_decoder", "out_of_memory_as_error", "respond", "run", "serve", "warm_up_decoding",
]
