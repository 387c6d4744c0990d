"""What a visitor is told when a request cannot be answered: the library's own message for what they can change
(running out of memory among them: the engine raises `OutOfMemory` wherever it happens), a short apology for the
rest (the log keeps the traceback)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

from tempo.errors import TempoError

log = logging.getLogger("tempo.app")


def refusal(exc: Exception) -> gr.Error:
    """`exc` as the visitor's message. A gr.Error also crosses a ZeroGPU worker's boundary intact, where any other
    exception arrives as its class name only."""
    if isinstance(exc, gr.Error):  # a refusal already, e.g. from the GPU worker
        return exc
    if isinstance(exc, TempoError):
        message = str(exc)
        log.info("refused: %s", message)
    else:
        log.exception("request failed")
        message = f"Something went wrong while processing this video ({type(exc).__name__}). Please try again."
    return gr.Error(message, print_exception=False)


def refused(handler: Callable) -> Callable:
    """`handler` (a function, or a generator function: an endpoint that streams) with any exception turned into
    the visitor's message (`refusal`)."""
    if inspect.isgeneratorfunction(handler):
        @functools.wraps(handler)
        def streamed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from handler(*args, **kwargs)
            except Exception as exc:
                raise refusal(exc) from None
        return streamed

    @functools.wraps(handler)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        except Exception as exc:
            raise refusal(exc) from None
    return wrapped
