"""How long the browser preview of an unplayable upload takes, and whether it delays the analysis.

For a 3-minute and a 1-hour 1280x720 30-fps MPEG-4 Part 2 clip (the codec of older cameras and phones; made once
with imageio-ffmpeg's ffmpeg and kept in the temp directory), it times `demo.preview.make_proxy`. Then it times
the first compressed segment of the 10-minute example with Tempo-Tiny, once alone and once while the 1-hour
clip's proxy is being made beside it, as when a visitor presses the button right after uploading.

    python -m benchmarks.preview_proxy [--json result.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import tempo
from demo import preview
from tempo.video import probe

ROOT = Path(__file__).resolve().parent.parent

QUESTION = "When does the star appear?"


def mpeg4_clip(seconds: int) -> Path:
    """A `seconds`-long 1280x720 30-fps MPEG-4 Part 2 test pattern with AAC sound, made once and cached."""
    import imageio_ffmpeg

    path = Path(tempfile.gettempdir()) / "tempo-bench" / f"mpeg4_{seconds}s_1280x720_30fps.mp4"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.mp4")
        subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y",
                        "-f", "lavfi", "-i", f"testsrc=size=1280x720:rate=30:duration={seconds}",
                        "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}",
                        "-c:v", "mpeg4", "-q:v", "6", "-c:a", "aac", str(partial)], check=True)
        partial.rename(path)
    return path


def proxy_seconds(path: Path) -> float:
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        preview.make_proxy(path, directory)
        return time.perf_counter() - started


def first_segment_seconds(model: tempo.TempoModel, video: Path) -> float:
    """From the request to the first compressed segment, uncached."""
    started = time.perf_counter()
    events = tempo.run(model, video, QUESTION, cache=tempo.VideoCache())
    for event in events:
        if isinstance(event, tempo.SegmentCompressed):
            events.close()
            return time.perf_counter() - started
    raise RuntimeError("no segment was compressed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    figures: dict = {"proxy_s": {}}
    clips = {"3 min": mpeg4_clip(180), "1 h": mpeg4_clip(3600)}
    for name, clip in clips.items():
        assert not preview.browser_playable(clip, probe.read_headers(clip))
        figures["proxy_s"][name] = round(proxy_seconds(clip), 2)
        print(f"proxy of the {name} MPEG-4 Part 2 clip: {figures['proxy_s'][name]:.2f} s", flush=True)

    model = tempo.from_pretrained(device="cpu")
    entries = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))
    example = ROOT / "examples" / next(e["video"] for e in entries if "10min" in e["video"])
    first_segment_seconds(model, example)  # warm-up
    alone = min(first_segment_seconds(model, example) for _ in range(3))
    beside = []
    for _ in range(3):
        worker = threading.Thread(target=proxy_seconds, args=(clips["1 h"],))
        worker.start()
        time.sleep(1.0)  # the proxy's ffmpeg is decoding by now
        beside.append(first_segment_seconds(model, example))
        worker.join()
    figures["first_segment_s"] = {"alone": round(alone, 2), "beside_a_proxy": round(min(beside), 2)}
    print(f"first segment of {example.name}: {alone:.2f} s alone, {min(beside):.2f} s while a proxy is made "
          "(best of 3 each)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
