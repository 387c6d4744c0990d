"""A moment of a video as an mp4 of its own: the source's packets copied as they are where the moment starts on a key
frame and ends where no later frame is needed to show it, else its frames decoded and encoded again (H.264). Either
way the clip's first frame is the first at or after the moment's start and its last the last before its end; the
first audio stream's packets in that span are copied along. Also the one frame shown at a time (a moment's key frame
where its run kept none)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Limits
from ..errors import InputError, VideoError
from ..times import clock, span

log = logging.getLogger(__name__)
SLACK_S = 1e-3  # a frame this close before the start (or the end) counts as at it: times are rounded to the ms
COPIED_AUDIO = frozenset({"aac", "mp3", "ac3", "eac3", "opus", "alac", "flac"})  # what an mp4 holds as it is
ENCODER = "libx264"
AV = Any  # a PyAV container, stream or packet (PyAV is imported where it is used)
ENCODER_OPTIONS = {"preset": "veryfast", "crf": "18"}  # visually lossless, and fast enough for minutes of video


@dataclass(frozen=True)
class Clip:
    """A clip written to `path`: the times of its first frame and of its end in the source (seconds), its frame
    count, and whether its video was copied (True) or encoded again (False)."""

    path: Path
    start: float
    end: float
    frames: int
    copied: bool

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Cut:
    """What a clip takes of the source's video stream, decided from its packets before anything is decoded."""

    first_pts: int  # the first frame kept (stream time base)
    last_pts: int  # the last frame kept
    end_pts: int  # where the clip ends: the frame after the last, or the last plus one frame's length
    frames: int
    copied: bool
    seek_pts: int  # the intra frame decoding starts from


def cut_clip(video: str | os.PathLike, start: float, end: float, target: str | os.PathLike,
             limits: Limits = Limits()) -> Clip:
    """The span [`start`, `end`) (seconds) of `video` written to `target` as an mp4; refused past the limits'
    clip length. The caller decides which files may be opened."""
    name = os.path.basename(os.fspath(video))
    if not (0 <= start < end):
        raise InputError(f"A clip needs a start before its end (got {clock(max(start, 0))} to {clock(max(end, 0))}).")
    if end - start > limits.max_clip_s + SLACK_S:
        raise InputError(f"The clip {span(start, end)} is {end - start:.0f} s long; this server cuts clips of up to "
                         f"{limits.max_clip_s:.0f} s: pick a shorter moment.")
    import av

    try:
        with av.open(os.fspath(video)) as source:
            if not source.streams.video:
                raise VideoError(f"{name} has no video stream to cut a clip from.")
            stream = source.streams.video[0]
            cut = plan_cut(source, stream, start, end, name)
        with av.open(os.fspath(video)) as source, av.open(os.fspath(target), "w", format="mp4") as output:
            stream = source.streams.video[0]
            audio = next((a for a in source.streams.audio if a.codec_context.name in COPIED_AUDIO), None)
            if cut.copied:
                frames = copy_packets(source, stream, audio, output, cut)
            else:
                frames = encode_frames(source, stream, audio, output, cut, limits)
    except av.FFmpegError as exc:
        raise VideoError(f"{name}: the clip {span(start, end)} could not be cut ({exc}).") from None
    base = stream_origin(stream)
    seconds = float(stream.time_base)
    log.info("clip %s of %s: %d frames, %s", span(start, end), name, frames, "copied" if cut.copied else "encoded")
    return Clip(Path(target), (cut.first_pts - base) * seconds, (cut.end_pts - base) * seconds, frames, cut.copied)


def stream_origin(stream: AV) -> int:
    """The stream's time zero (its first timestamp), from which video times are counted as the readers count them."""
    return stream.start_time or 0


def plan_cut(source: AV, stream: AV, start: float, end: float, name: str) -> Cut:
    """Which frames the clip keeps and whether its packets can be copied: when the first kept frame is an intra frame
    and the packets from it, in decoding order, hold the kept frames and nothing else."""
    base, unit = stream_origin(stream), float(stream.time_base)
    low, high = base + (start - SLACK_S) / unit, base + (end - SLACK_S) / unit
    packets = [(p.pts, p.dts, p.is_keyframe) for p in source.demux(stream) if p.pts is not None and p.size]
    kept = sorted(pts for pts, _, _ in packets if low <= pts < high)
    if not kept:
        raise InputError(f"{name} has no frame between {clock(start)} and {clock(end)}.")
    first, last = kept[0], kept[-1]
    later = [pts for pts, _, _ in packets if pts > last]
    frame = round(1 / (float(stream.average_rate or 25) * unit))  # one frame's length, in the stream's time base
    end_pts = min(later) if later else last + frame
    keys = [pts for pts, _, key in packets if key and pts <= first]
    seek = max(keys) if keys else min(pts for pts, _, _ in packets)
    order = [pts for pts, _, _ in packets]  # decoding order
    at = next(i for i, (pts, _, key) in enumerate(packets) if pts == first)
    taken = order[at:at + len(kept)]
    copied = packets[at][2] and sorted(taken) == kept
    return Cut(first, last, end_pts, len(kept), bool(copied), seek)


def copy_packets(source: AV, stream: AV, audio: AV, output: AV, cut: Cut) -> int:
    """The kept packets (and the audio's in their span) muxed as they are, their times moved to start at zero."""
    video_out = output.add_stream_from_template(stream)
    audio_out = output.add_stream_from_template(audio) if audio is not None else None
    source.seek(cut.first_pts, stream=stream, backward=True)
    frames, done = 0, False
    for packet in source.demux(*([stream] + ([audio] if audio is not None else []))):
        if packet.pts is None or packet.size == 0:
            continue
        if packet.stream is stream:
            if frames == cut.frames:
                done = True
                continue
            if packet.pts < cut.first_pts and frames == 0:
                continue
            shift(packet, cut.first_pts, video_out)
            output.mux(packet)
            frames += 1
        elif audio_out is not None and not copy_audio(packet, stream, cut, audio_out, output) and done:
            break
    return frames


def copy_audio(packet: AV, stream: AV, cut: Cut, audio_out: AV, output: AV) -> bool:
    """An audio packet muxed when it falls in the clip's span; whether it came before the span's end."""
    seconds = float(stream.time_base)
    begin = (cut.first_pts - stream_origin(stream)) * seconds
    finish = (cut.end_pts - stream_origin(stream)) * seconds
    unit = float(packet.time_base)
    when = (packet.pts - (packet.stream.start_time or 0)) * unit
    if begin - SLACK_S <= when < finish:
        shift(packet, (packet.stream.start_time or 0) + round(begin / unit), audio_out)
        output.mux(packet)
    return when < finish


def shift(packet: AV, origin: int, stream: AV) -> None:
    """`packet` moved `origin` earlier and sent to `stream` of the output."""
    packet.pts -= origin
    if packet.dts is not None:
        packet.dts -= origin
    packet.stream = stream


def encode_frames(source: AV, stream: AV, audio: AV, output: AV, cut: Cut, limits: Limits) -> int:
    """The kept frames decoded from the intra frame before them and encoded again as H.264 (4:2:0, even sizes), at
    the source's times."""
    context = stream.codec_context
    width, height = context.width - context.width % 2, context.height - context.height % 2
    if width * height > limits.max_frame_pixels or width < 2 or height < 2:
        raise VideoError(f"Frames of {context.width}×{context.height} cannot be encoded into a clip here.")
    video_out = output.add_stream(ENCODER, rate=stream.average_rate or Fraction(25), options=ENCODER_OPTIONS)
    video_out.width, video_out.height, video_out.pix_fmt = width, height, "yuv420p"
    video_out.time_base = stream.time_base
    audio_out = output.add_stream_from_template(audio) if audio is not None else None
    source.seek(cut.seek_pts, stream=stream, backward=True)
    frames = 0
    for frame in source.decode(stream):
        if frame.pts is None or frame.pts < cut.first_pts:
            continue
        if frame.pts > cut.last_pts:
            break
        picture = frame.reformat(width=width, height=height, format="yuv420p")
        picture.pts, picture.time_base = frame.pts - cut.first_pts, stream.time_base
        output.mux(video_out.encode(picture))
        frames += 1
    output.mux(video_out.encode(None))
    if audio is not None and audio_out is not None:
        source.seek(cut.first_pts, stream=stream, backward=True)
        for packet in source.demux(audio):
            if packet.pts is None or packet.size == 0:
                continue
            if not copy_audio(packet, stream, cut, audio_out, output):
                break
    return frames


def frame_at(video: str | os.PathLike, seconds: float, long_edge: int = 640) -> np.ndarray:
    """The frame shown at `seconds` of `video` (RGB, shrunk to `long_edge`), decoded from the intra frame before it."""
    import av

    name = os.path.basename(os.fspath(video))
    try:
        with av.open(os.fspath(video)) as source:
            stream = source.streams.video[0]
            wanted = stream_origin(stream) + (seconds + SLACK_S) / float(stream.time_base)
            source.seek(max(int(wanted), 0), stream=stream, backward=True)
            shown = None
            for frame in source.decode(stream):
                if frame.pts is not None and frame.pts > wanted and shown is not None:
                    break
                shown = frame
    except (av.FFmpegError, IndexError) as exc:
        raise VideoError(f"{name}: the frame at {clock(seconds)} could not be decoded ({exc}).") from None
    if shown is None:
        raise VideoError(f"{name} has no frame at {clock(seconds)}.")
    scale = min(1.0, long_edge / max(shown.width, shown.height))
    return shown.to_ndarray(format="rgb24", width=max(2, round(shown.width * scale)),
                            height=max(2, round(shown.height * scale)))
