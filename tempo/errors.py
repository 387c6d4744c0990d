"""Errors a user can act on: each message says what is wrong and what to do about it."""


class TempoError(Exception):
    """Base class for problems caused by inputs or settings rather than by a bug."""


class VideoError(TempoError):
    """The file is missing, is not a video, or cannot be decoded."""


class InputError(TempoError):
    """A question or a setting is out of range (empty question, budget that cannot fit, ...)."""


class ModelError(TempoError):
    """A checkpoint or its base model cannot be found or does not have the expected format."""


class ResourceError(TempoError):
    """The machine ran out of memory for this request; smaller settings may fit."""


class OutOfMemory(ResourceError):
    """A request ran out of GPU or host memory (`tempo.engine` raises it wherever that happens)."""

    def __init__(self, message: str = "Out of memory on this video. Lower max frames, the micro-batch or the budget, "
                                      "or use a smaller model.") -> None:
        super().__init__(message)
