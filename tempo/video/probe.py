"""What a video file says about itself before a single frame is decoded.

PyAV reads the container's headers with every decoder told to skip every frame, so a file that claims giant
frames costs nothing to ask. Besides the container's own frame size, the bitstream's headers are read where they
can say something else: an H.264 sequence parameter set, an MPEG-4 Part 2 video object layer, a JPEG frame header.
`check` refuses, with the numbers, what is over the limits. A file's headers are read once while it stays the same
file (path, size and modification time): the preview, the question and its follow-ups share that reading.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..config import Limits
from ..errors import InputError, VideoError
from ..times import length

SKIP_ALL = {"skip_frame": "all", "threads": "1"}  # open each stream's decoder without decoding anything
MAX_STREAMS = 64
PROBES_KEPT = 256  # files whose headers are remembered, the least recently asked about leaving first


@dataclass(frozen=True)
class Probe:
    """The headers' account of a file's (first) video stream."""

    container: str
    codec: str
    width: int
    height: int
    claimed: tuple[int, int] | None  # (width, height) the bitstream's own headers claim, where they were read
    duration: float  # seconds; 0 when the headers do not say
    pixel_format: str | None = None  # the decoder's pixel format, e.g. yuv420p, where the headers say

    @property
    def largest(self) -> tuple[int, int]:
        """The largest frame size any header claims."""
        sizes = [(self.width, self.height)] + ([self.claimed] if self.claimed else [])
        return max(sizes, key=lambda size: size[0] * size[1])


_probes: OrderedDict[tuple[str, int, int], Probe] = OrderedDict()
_probes_lock = threading.Lock()


def probe(path: str | os.PathLike) -> Probe:
    """`path`'s headers, read once while the file is unchanged; VideoError if they are not a video's."""
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    with _probes_lock:
        if key in _probes:
            _probes.move_to_end(key)
            return _probes[key]
    read = read_headers(path)
    with _probes_lock:
        _probes[key] = read
        while len(_probes) > PROBES_KEPT:
            _probes.popitem(last=False)
    return read


def read_headers(path: str | os.PathLike) -> Probe:
    """Read `path`'s headers now; VideoError if they are not a video's."""
    import av

    name = os.path.basename(os.fspath(path))
    try:
        with av.open(os.fspath(path), stream_options=[SKIP_ALL] * MAX_STREAMS) as container:  # type: ignore[list-item]
            if not container.streams.video:
                raise VideoError(f"{name} has no video stream (is it an audio file?).")
            stream = container.streams.video[0]
            context = stream.codec_context
            extradata = bytes(context.extradata or b"")
            first = b""
            if context.name in ("h264", "mpeg4", "mjpeg") and not claimed_size(context.name, extradata):
                first = next((bytes(p) for p in container.demux(stream) if p.size), b"")
            duration = float(container.duration or 0) / 1e6
            if not duration and stream.duration and stream.time_base:
                duration = float(stream.duration * stream.time_base)
            return Probe(container.format.name, context.name, context.width, context.height,
                         claimed_size(context.name, extradata) or claimed_size(context.name, first), duration,
                         pixel_format(context.name, extradata) or pixel_format(context.name, first))
    except VideoError:
        raise
    except Exception as exc:  # PyAV raises many kinds of error for files that are not videos
        raise VideoError(f"{name} is not a readable video (unknown format or damaged file).") from exc


def check(probe: Probe, limits: Limits) -> None:
    """Refuse a video whose frames or length are over `limits`, before any frame is decoded."""
    width, height = probe.largest
    if width * height > limits.max_frame_pixels:
        said = f"{width}×{height}"
        if probe.claimed and probe.claimed != (probe.width, probe.height):
            said += (f" (its {probe.codec.upper()} stream claims {probe.claimed[0]}×{probe.claimed[1]}, its "
                     f"container {probe.width}×{probe.height})")
        raise InputError(f"The video's frames are {said}: {width * height / 1e6:,.1f} megapixels; this server "
                         f"accepts up to {limits.max_frame_pixels / 1e6:,.1f} megapixels a frame.")
    if probe.duration > limits.max_duration_s:
        raise InputError(f"The video lasts {length(probe.duration)}; this server accepts up to "
                         f"{length(limits.max_duration_s)}.")


def oversized_frame(width: int, height: int, max_pixels: float) -> VideoError:
    """The refusal for a decoded frame larger than its headers said (a stream that grows part-way)."""
    return VideoError(f"The video's frames grow to {width}×{height} part-way: {width * height / 1e6:,.1f} "
                      f"megapixels; this server accepts up to {max_pixels / 1e6:,.1f} megapixels a frame.")


# ------------------------------------------------------------------------------------------------ bitstreams

class Bits:
    """A big-endian bit reader with Exp-Golomb codes; reading past the end raises IndexError."""

    def __init__(self, data: bytes):
        self.data, self.position = data, 0

    def u(self, count: int) -> int:
        value = 0
        for _ in range(count):
            byte = self.data[self.position >> 3]
            value = (value << 1) | ((byte >> (7 - (self.position & 7))) & 1)
            self.position += 1
        return value

    def ue(self) -> int:
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
            if zeros > 31:
                raise ValueError("Exp-Golomb code too long")
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self) -> int:
        value = self.ue()
        return (value + 1) // 2 if value & 1 else -(value // 2)


def claimed_size(codec: str, data: bytes) -> tuple[int, int] | None:
    """The frame size in `data` (a stream's extradata, or its first packet) as the codec's own headers state it."""
    parse = {"h264": h264_size, "mpeg4": mpeg4_size, "mjpeg": jpeg_size}.get(codec)
    if parse is None or not data:
        return None
    try:
        return parse(data)
    except (IndexError, ValueError):  # a damaged header says nothing we can use
        return None


def pixel_format(codec: str, data: bytes) -> str | None:
    """The pixel format an H.264 stream's sequence parameter set states (chroma sampling and bit depth), e.g.
    yuv420p; None for other codecs, or when no header says (the decoder is not asked: it would decode)."""
    if codec != "h264" or not data:
        return None
    try:
        return h264_pixel_format(data)
    except (IndexError, ValueError):
        return None


def h264_pixel_format(data: bytes) -> str | None:
    """Chroma format and luma bit depth from the first sequence parameter set (ITU-T H.264, 7.3.2.1.1): profiles
    below High state neither and are 4:2:0 at 8 bits."""
    found = _sequence_parameters(data)
    if found is None:
        return None
    profile, bits = found
    chroma, depth = 1, 8
    if profile in HIGH_PROFILES:
        chroma = bits.ue()
        if chroma == 3:
            bits.u(1)  # separate_colour_plane_flag
        depth = bits.ue() + 8
    layout = {0: "gray", 1: "yuv420p", 2: "yuv422p", 3: "yuv444p"}.get(chroma)
    if layout is None:
        return None
    return layout if depth == 8 else f"{layout}{depth}le"


def _sequence_parameters(data: bytes) -> tuple[int, Bits] | None:
    """The first sequence parameter set's profile, and its bits read up to seq_parameter_set_id (7.3.2.1.1)."""
    sps = next((unit for unit in _nal_units(data) if unit and unit[0] & 0x1F == 7), None)
    if sps is None:
        return None
    bits = Bits(sps[1:].replace(b"\x00\x00\x03", b"\x00\x00"))
    profile = bits.u(8)
    bits.u(16)  # constraint flags, level
    bits.ue()  # seq_parameter_set_id
    return profile, bits


def _nal_units(data: bytes) -> list[bytes]:
    """NAL units of an avcC record, of Annex B data, or of length-prefixed (4-byte) packets."""
    if data[:1] == b"\x01" and len(data) > 8:  # avcC: the sequence parameter sets are listed after 6 bytes
        count, offset, units = data[5] & 0x1F, 6, []
        for _ in range(count):
            size = int.from_bytes(data[offset:offset + 2], "big")
            units.append(data[offset + 2:offset + 2 + size])
            offset += 2 + size
        return units
    if b"\x00\x00\x01" in data[:4]:
        return [unit.lstrip(b"\x00") for unit in data.split(b"\x00\x00\x01") if unit]
    units, offset = [], 0
    while offset + 4 <= len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        units.append(data[offset + 4:offset + 4 + size])
        offset += 4 + size
    return units


HIGH_PROFILES = {100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135}


def h264_size(data: bytes) -> tuple[int, int] | None:
    """Width and height in macroblocks from the first sequence parameter set (ITU-T H.264, 7.3.2.1.1)."""
    found = _sequence_parameters(data)
    if found is None:
        return None
    profile, bits = found
    if profile in HIGH_PROFILES:
        if bits.ue() == 3:  # chroma_format_idc
            bits.u(1)
        bits.ue(), bits.ue(), bits.u(1)  # bit depths, qpprime_y_zero_transform_bypass
        if bits.u(1):  # scaling matrices
            for i in range(12 if profile == 244 else 8):
                if bits.u(1):
                    last = 8
                    for _ in range(16 if i < 6 else 64):
                        last = (last + bits.se()) % 256
                        if last == 0:
                            break
    bits.ue()  # log2_max_frame_num_minus4
    order = bits.ue()
    if order == 0:
        bits.ue()
    elif order == 1:
        bits.u(1), bits.se(), bits.se()
        for _ in range(bits.ue()):
            bits.se()
    bits.ue(), bits.u(1)  # max_num_ref_frames, gaps_in_frame_num_allowed
    width_mbs, height_units = bits.ue() + 1, bits.ue() + 1
    frame_mbs_only = bits.u(1)
    return width_mbs * 16, height_units * 16 * (2 - frame_mbs_only)


def mpeg4_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from the first video object layer header (ISO/IEC 14496-2, 6.2.3)."""
    start = next((i for i in range(len(data) - 4) if data[i:i + 3] == b"\x00\x00\x01" and 0x20 <= data[i + 3] <= 0x2F),
                 None)
    if start is None:
        return None
    bits = Bits(data[start + 4:])
    bits.u(1), bits.u(8)  # random_accessible_vol, video_object_type_indication
    verid = 1
    if bits.u(1):  # is_object_layer_identifier
        verid, _ = bits.u(4), bits.u(3)
    if bits.u(4) == 15:  # aspect_ratio_info: extended
        bits.u(16)
    if bits.u(1):  # vol_control_parameters
        bits.u(3)  # chroma_format, low_delay
        if bits.u(1):  # vbv_parameters
            bits.u(15 + 1 + 15 + 1 + 15 + 1 + 3 + 11 + 1 + 15 + 1)
    shape = bits.u(2)
    if shape == 3 and verid != 1:
        bits.u(4)
    bits.u(1)
    resolution = bits.u(16)
    bits.u(1)
    if bits.u(1):  # fixed_vop_rate
        bits.u(max(1, (resolution - 1).bit_length()))
    if shape != 0:  # not rectangular: no size in the header
        return None
    bits.u(1)
    width = bits.u(13)
    bits.u(1)
    return width, bits.u(13)


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from the first start-of-frame marker (ITU-T T.81, B.2.2)."""
    offset = 2 if data[:2] == b"\xff\xd8" else None
    while offset is not None and offset + 9 <= len(data):
        if data[offset] != 0xFF:
            return None
        marker = data[offset + 1]
        size = int.from_bytes(data[offset + 2:offset + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(data[offset + 5:offset + 7], "big")
            return int.from_bytes(data[offset + 7:offset + 9], "big"), height
        offset += 2 + size
    return None
