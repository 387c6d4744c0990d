"""The engine: a request from a video file and a question to events, in two halves that a server can run apart.

This face is all that callers use (the app, analysis, batch jobs, the command line, the integrations): a whole
request (`run`, `answer`), the compressor alone (`compress`) and another allocation of its output (`reanswer`), the
host's half (`serve`: checks, the per-video cache, the pixels) and the accelerator's
(`execute`), the `Request` the host's half takes (which `Answers` it gives) and the `Job` that travels between
them (`execute` turns running out of memory into `OutOfMemory`), the cache and the checks. The code that composes
the inner steps itself (the benchmark, the conformance check, live mode, analysis) has its own door,
`tempo.engine.steps`.

A question's way, all in here: `run` makes a `Request` -> `host.serve` (zoom's two passes, or one) ->
`host.serve_once` (the file opened or found in the cache, a `Job` made) -> `accelerator.execute` (compression) ->
`accelerator.respond` (allocation, then the decoder)."""

from ..video.sandbox import warm_up as warm_up_decoding
from .accelerator import execute
from .cache import VideoCache
from .host import answer, check_file, check_question, check_size, checked, compress, reanswer, run, serve
from .job import Job
from .request import Answers, Request

__all__ = [
    "Answers", "Job", "Request", "VideoCache", "answer", "check_file", "check_question", "check_size", "checked",
    "compress", "execute", "reanswer", "run", "serve", "warm_up_decoding",
]
