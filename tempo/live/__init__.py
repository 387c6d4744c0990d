"""Tempo live: a standing question over a camera or a stream, each new segment compressed and scored as it arrives,
alerts when its relevance rises clearly above the stream's recent level, and questions answered at any moment over
the recent memories. Typed events (`events`) are the contract with callers."""

from .alerts import AlertRule
from .errors import StreamError
from .events import Alert, Gap, LiveEvent, SegmentWatched, WatchEnded, WatchStarted
from .network import StreamFetcher, open_stream
from .sources import file_frames, stream_frames
from .watch import LiveConfig, LiveWatch, watch
from .world import UNSEEN_SEEDS, LiveWorld, Sighting

__all__ = ["Alert", "AlertRule", "Gap", "LiveConfig", "LiveEvent", "LiveWatch", "LiveWorld", "SegmentWatched",
           "Sighting", "StreamError", "StreamFetcher", "UNSEEN_SEEDS", "WatchEnded", "WatchStarted", "file_frames",
           "open_stream", "stream_frames", "watch"]
