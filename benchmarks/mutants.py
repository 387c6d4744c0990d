"""Hostile videos for `fuzz.py`: six small seeds (mp4/H.264, mkv/H.264, webm/VP8, webm/VP9, avi/MJPEG, mov/MPEG-4
Part 2) made with imageio-ffmpeg's ffmpeg, and seeded mutants of them: bit flips, overwritten bytes, truncations,
lying box and element sizes, and header rewrites that claim giant frames (the H.264 sequence parameter set, the
MPEG-4 video object layer, the JPEG frame header, VP8 and VP9 frame headers, and the containers' own sizes).

    python -m benchmarks.mutants DIR [--count 1200] [--seed 0]   # writes the mutants and an index.json
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import imageio_ffmpeg

SEEDS = {  # name: encoder arguments (a 6 s 96x64 test pattern at 8 fps: two segments at 2 fps)
    "h264.mp4": ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"],
    "h264.mkv": ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"],
    "vp8.webm": ["-c:v", "libvpx", "-deadline", "realtime"],
    "vp9.webm": ["-c:v", "libvpx-vp9", "-deadline", "realtime"],
    "mjpeg.avi": ["-c:v", "mjpeg", "-q:v", "5"],
    "mpeg4.mov": ["-c:v", "mpeg4", "-q:v", "5"],
}
GIANT = [(16000, 16000), (8192, 8192), (8191, 8191), (16383, 16383), (65535, 32)]


def make_seed(name: str, path: Path) -> bytes:
    """The clean seed `name`: ffmpeg's moving test pattern, 6 s, 96x64, 8 fps."""
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f",
                    "lavfi", "-i", "testsrc=s=96x64:r=8:d=6", *SEEDS[name], str(path)], check=True, timeout=120)
    return path.read_bytes()


# ------------------------------------------------------------------------------------------------ bit fields

def bits_of(data: bytes) -> list[int]:
    return [(byte >> (7 - i)) & 1 for byte in data for i in range(8)]


def bytes_of(bits: list[int]) -> bytes:
    bits = bits + [0] * (-len(bits) % 8)
    return bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8))


def ue_bits(value: int) -> list[int]:
    code = bin(value + 1)[2:]
    return [0] * (len(code) - 1) + [int(c) for c in code]


def set_bits(data: bytearray, position: int, width: int, value: int) -> None:
    for i in range(width):
        byte, bit = divmod(position + i, 8)
        if byte < len(data):
            mask = 1 << (7 - bit)
            data[byte] = (data[byte] | mask) if (value >> (width - 1 - i)) & 1 else (data[byte] & ~mask)


# ------------------------------------------------------------------------------------------------ header rewrites

def h264_sps_claim(data: bytes, size: tuple[int, int]) -> bytes | None:
    """The mp4's avcC sequence parameter set with its size fields rewritten (a longer SPS: every enclosing box
    grows; the index sits after the frames, so no offset moves). Baseline/main SPS only, as the seeds make."""
    avcc = data.find(b"avcC")
    if avcc < 4:
        return None
    sps_length = int.from_bytes(data[avcc + 10:avcc + 12], "big")
    sps = data[avcc + 12:avcc + 12 + sps_length]
    bits = bits_of(sps[1:])

    def ue_at(position: int) -> tuple[int, int]:
        zeros = 0
        while bits[position + zeros] == 0:
            zeros += 1
        end = position + 2 * zeros + 1
        return int("".join(map(str, bits[position + zeros:end])), 2) - 1, end

    position = 24
    _, position = ue_at(position)  # seq_parameter_set_id
    if sps[1] in (100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135):
        return None  # high profiles carry more fields before the size; the seeds are not high profile
    _, position = ue_at(position)  # log2_max_frame_num_minus4
    order, position = ue_at(position)
    if order == 0:
        _, position = ue_at(position)
    elif order == 1:
        return None
    _, position = ue_at(position)  # max_num_ref_frames
    position += 1
    start = position
    _, position = ue_at(position)
    _, end = ue_at(position)
    new_bits = bits[:start] + ue_bits(size[0] // 16 - 1) + ue_bits(size[1] // 16 - 1) + bits[end:]
    new_sps = sps[:1] + bytes_of(new_bits)
    delta = len(new_sps) - len(sps)
    out = bytearray(data[:avcc + 10] + len(new_sps).to_bytes(2, "big") + new_sps + data[avcc + 12 + sps_length:])
    for box in (b"avcC", b"avc1", b"stsd", b"stbl", b"minf", b"mdia", b"trak", b"moov"):  # the enclosing boxes grow
        at = out.find(box) - 4
        if at >= 0:
            out[at:at + 4] = (int.from_bytes(out[at:at + 4], "big") + delta).to_bytes(4, "big")
    return bytes(out)


def mpeg4_vol_claim(data: bytes, size: tuple[int, int]) -> bytes | None:
    """Every video object layer header's 13-bit width and height rewritten in place."""
    out, found = bytearray(data), False
    start = 0
    while (start := out.find(b"\x00\x00\x01", start)) >= 0:
        code = out[start + 3] if start + 3 < len(out) else -1
        if 0x20 <= code <= 0x2F:
            position = find_vol_size(bytes(out[start + 4:start + 64]))
            if position is not None:
                base = (start + 4) * 8 + position
                set_bits(out, base, 13, min(size[0], 8191))
                set_bits(out, base + 14, 13, min(size[1], 8191))
                found = True
        start += 3
    return bytes(out) if found else None


def find_vol_size(header: bytes) -> int | None:
    """The bit position of the width field in a video object layer header (the same walk as tempo.video.probe)."""
    bits, position = bits_of(header), 0

    def take(count: int) -> int:
        nonlocal position
        value = int("".join(map(str, bits[position:position + count])) or "0", 2)
        position += count
        return value

    take(1), take(8)
    verid = 1
    if take(1):
        verid, _ = take(4), take(3)
    if take(4) == 15:
        take(16)
    if take(1):
        take(3)
        if take(1):
            take(79)
    shape = take(2)
    if shape == 3 and verid != 1:
        take(4)
    take(1)
    resolution = take(16)
    take(1)
    if take(1):
        take(max(1, (resolution - 1).bit_length()))
    if shape != 0:
        return None
    return position + 1


def jpeg_sof_claim(data: bytes, size: tuple[int, int]) -> bytes | None:
    """Every JPEG frame header's height and width (16 bits each) rewritten in place."""
    out, found, start = bytearray(data), False, 0
    while (start := out.find(b"\xff\xc0", start)) >= 0:
        out[start + 5:start + 9] = struct.pack(">HH", min(size[1], 65535), min(size[0], 65535))
        found, start = True, start + 2
    return bytes(out) if found else None


def vp8_claim(data: bytes, size: tuple[int, int]) -> bytes | None:
    """The first key frame's 14-bit width and height (after its start code 9d 01 2a)."""
    start = data.find(b"\x9d\x01\x2a")
    if start < 0:
        return None
    out = bytearray(data)
    out[start + 3:start + 7] = struct.pack("<HH", min(size[0], 16383), min(size[1], 16383))
    return bytes(out)


def vp9_claim(data: bytes, size: tuple[int, int]) -> bytes | None:
    """The first key frame's frame size (16 bits each, minus one) after its sync code 49 83 42 (profile 0)."""
    start = data.find(b"\x49\x83\x42")
    if start < 0:
        return None
    out = bytearray(data)
    position = (start + 3) * 8 + 4  # profile 0: color_space (3 bits) and color_range (1 bit)
    set_bits(out, position, 16, min(size[0], 65536) - 1)
    set_bits(out, position + 16, 16, min(size[1], 65536) - 1)
    return bytes(out)


def container_claim(data: bytes, size: tuple[int, int]) -> bytes | None:
    """The container's own frame size: mp4 tkhd and sample entry, mkv PixelWidth/PixelHeight (2-byte ones), avi
    main and stream headers."""
    out, found = bytearray(data), False
    for entry in (b"avc1", b"mp4v"):
        at = out.find(entry, out.find(b"stsd"))
        if at > 0:
            out[at + 28:at + 32] = struct.pack(">HH", min(size[0], 65535), min(size[1], 65535))
            found = True
    for element, value in ((b"\xb0", size[0]), (b"\xba", size[1])):  # mkv: ID, 1-byte size 0x82, 2 bytes
        at = out.find(element + b"\x82")
        if at > 0:
            out[at + 2:at + 4] = min(value, 65535).to_bytes(2, "big")
            found = True
    at = out.find(b"avih")
    if at > 0:
        out[at + 40:at + 48] = struct.pack("<II", *size)
        found = True
    at = out.find(b"strf")
    if at > 0:
        out[at + 12:at + 20] = struct.pack("<ii", *size)
        found = True
    return bytes(out) if found else None


CLAIMS: dict[str, list[Callable[[bytes, tuple[int, int]], bytes | None]]] = {
    "h264.mp4": [h264_sps_claim, container_claim], "h264.mkv": [container_claim],
    "vp8.webm": [vp8_claim, container_claim], "vp9.webm": [vp9_claim, container_claim],
    "mjpeg.avi": [jpeg_sof_claim, container_claim], "mpeg4.mov": [mpeg4_vol_claim, container_claim],
}


# ------------------------------------------------------------------------------------------------ mutations

def lying_size(data: bytes, rng: random.Random) -> bytes:
    """A box, element or chunk size field rewritten: an mp4 box, an avi chunk or an EBML element claims a size
    it does not have (huge, zero, or off by a little)."""
    out = bytearray(data)
    kinds = [b"moov", b"trak", b"stsd", b"avcC", b"stsz", b"stco", b"mdat", b"LIST", b"movi", b"strf", b"idx1",
             b"\x18\x53\x80\x67", b"\x16\x54\xae\x6b", b"\x1f\x43\xb6\x75", b"\x63\xa2"]
    found = [(kind, at) for kind in kinds if (at := out.find(kind)) >= 0]
    if not found:
        return bit_flips(data, rng)
    kind, at = rng.choice(found)
    value = rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, rng.randrange(1, 1 << 20)])
    if kind[:1].isalpha():  # mp4 boxes: the size is the 4 bytes before the type; avi chunks: the 4 after
        where = at - 4 if kind in (b"moov", b"trak", b"stsd", b"avcC", b"stsz", b"stco", b"mdat") else at + 4
        out[where:where + 4] = value.to_bytes(4, "big" if where < at else "little")
    else:  # EBML: the size follows the ID; 8-byte sizes keep their length marker
        out[at + len(kind):at + len(kind) + 8] = bytes([0x01]) + value.to_bytes(7, "big")
    return bytes(out)


def bit_flips(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice([1, 2, 8, 64])):
        position = rng.randrange(len(out) * 8)
        out[position // 8] ^= 1 << (position % 8)
    return bytes(out)


def overwrite(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    start = rng.randrange(len(out))
    length = min(len(out) - start, rng.choice([4, 32, 512]))
    out[start:start + length] = rng.randbytes(length)
    return bytes(out)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:max(1, int(len(data) * rng.uniform(0.01, 0.99)))]


def claim_giant(name: str, data: bytes, rng: random.Random) -> bytes:
    size = rng.choice(GIANT)
    for claim in rng.sample(CLAIMS[name], len(CLAIMS[name])):
        mutated = claim(data, size)
        if mutated is not None:
            return mutated
    return overwrite(data, rng)


def mutate(name: str, data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutant of seed `name`: what was done to it, and its bytes."""
    kind = rng.choices(["bits", "overwrite", "truncate", "sizes", "giant"], weights=[3, 2, 2, 2, 3])[0]
    if kind == "giant":
        return kind, claim_giant(name, data, rng)
    operator = {"bits": bit_flips, "overwrite": overwrite, "truncate": truncate, "sizes": lying_size}[kind]
    return kind, operator(data, rng)


def write_mutants(directory: Path, count: int, seed: int = 0) -> list[dict]:
    """The six clean seeds, then `count` mutants spread evenly over them; returns the index (file, seed, kind)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    index = []
    seeds = {}
    for name in SEEDS:
        seeds[name] = make_seed(name, directory / f"seed-{name}")
        index.append({"file": f"seed-{name}", "seed": name, "kind": "clean"})
    for number in range(count):
        name = list(SEEDS)[number % len(SEEDS)]
        kind, data = mutate(name, seeds[name], rng)
        file = f"m{number:04d}-{kind}-{name}"
        (directory / file).write_bytes(data)
        index.append({"file": file, "seed": name, "kind": kind})
    (directory / "index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return index


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--count", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    index = write_mutants(Path(args.directory), args.count, args.seed)
    print(f"wrote {len(index)} files to {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
