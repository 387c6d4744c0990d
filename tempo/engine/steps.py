"""The engine's inner steps, for the code that composes them itself: the benchmark, the conformance check, the GPU
check, live mode and analysis (another allocation of a compression). Everything else enters through
`tempo.engine`."""

from .accelerator import compress_batch, encode_batch, micro_batches, out_of_memory_as_error, respond
from .budget import allocate_tokens, effective_budget
from .cache import VideoEntry, VideoKey, default_cache, give_back_freed_memory
from .host import open_decoder
from .job import Dialogue

__all__ = [
    "Dialogue", "VideoEntry", "VideoKey", "allocate_tokens", "compress_batch", "default_cache", "effective_budget",
    "encode_batch", "give_back_freed_memory", "micro_batches", "open_decoder", "out_of_memory_as_error", "respond",
]
