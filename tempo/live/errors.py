"""The one error live mode adds: a stream that cannot be read, or stopped being readable part-way."""

from ..errors import TempoError


class StreamError(TempoError):
    """The stream cannot be opened, or died mid-stream (unplugged, gone, damaged); the message says which."""
