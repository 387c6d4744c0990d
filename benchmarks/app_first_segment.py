"""Seconds from pressing the button to the first compressed segment on the timeline, for a 10-minute video.

Drives a running app through gradio_client streaming, on both endpoints: /answer (JSON) and /analyze (what
the page shows). Without --url it starts `app.py` itself on a free loopback port (model from $TEMPO_MODEL /
$TEMPO_BASE as usual) and stops it afterwards. The test video (testsrc2, 640x360, 25 fps) is generated once
with imageio-ffmpeg's ffmpeg and cached in the temp directory, never in the repository.

    python -m benchmarks.app_first_segment [--url http://127.0.0.1:7860] [--runs 2] [--json result.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from benchmarks.local_app import start_app

ROOT = Path(__file__).resolve().parent.parent

QUESTION = "When does the pattern change colour?"


def pattern_video(seconds: int = 600) -> Path:
    """A `seconds`-long 640x360 25 fps H.264 test pattern, made once and cached."""
    import imageio_ffmpeg

    path = Path(tempfile.gettempdir()) / "tempo-bench" / f"testsrc2_{seconds}s_640x360_25fps.mp4"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.mp4")
        subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
                        "-i", f"testsrc2=size=640x360:rate=25:duration={seconds}", "-c:v", "libx264",
                        "-preset", "veryfast", "-crf", "30", "-g", "250", "-pix_fmt", "yuv420p", str(partial)],
                       check=True)
        partial.rename(path)
    return path


@contextmanager
def local_app() -> Iterator[str]:
    """app.py on a free loopback port (model from $TEMPO_MODEL as usual); its URL once it answers."""
    with tempfile.TemporaryDirectory(prefix="tempo-first-segment-") as scratch:
        process, url = start_app(Path(scratch))
        try:
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)

def has_segment(endpoint: str, output) -> bool:
    """Does this streamed update show at least one compressed segment?"""
    if endpoint == "/answer":
        return bool(output.get("segments"))
    status = output[0] if isinstance(output[0], str) else ""
    return bool(re.search(r"Compressing segment [1-9]|Allocated|Done in", status))


def measure(client, endpoint: str, video, max_frames: int) -> dict:
    """One request: seconds to the first segment and to the end."""
    args = ((video, QUESTION, max_frames) if endpoint == "/answer"
            else (video, QUESTION, max_frames, 8192, 4, "ata", "head", 0, 512, False))
    started = time.perf_counter()
    first = None
    job = client.submit(*args, api_name=endpoint)
    for output in job:
        if first is None and has_segment(endpoint, output):
            first = time.perf_counter() - started
    total = time.perf_counter() - started
    result = job.result()
    segments = len(result["segments"]) if endpoint == "/answer" else None
    return {"endpoint": endpoint, "first_segment_s": round(first, 3) if first else None,
            "total_s": round(total, 3), "segments": segments}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start app.py on a free loopback port)")
    parser.add_argument("--video", type=Path, help="video to use (default: a generated 10-minute test pattern)")
    parser.add_argument("--runs", type=int, default=2, help="requests per endpoint (default 2)")
    parser.add_argument("--max-frames", type=int, default=1024, help="max sampled frames (default 1024)")
    parser.add_argument("--json", dest="json_out", type=Path, help="also write the results here")
    args = parser.parse_args()

    from gradio_client import Client, handle_file

    video_path = args.video or pattern_video()
    with (local_app() if args.url is None else nullcontext(args.url)) as url:
        client = Client(url, verbose=False, download_files=False)
        video = handle_file(str(video_path))
        rows = [dict(run=run + 1, **measure(client, endpoint, video, args.max_frames))
                for endpoint in ("/answer", "/analyze") for run in range(args.runs)]

    print(f"{video_path.name}, max_frames {args.max_frames}, {url}")
    print(f"{'endpoint':<10} {'run':>3} {'first segment (s)':>18} {'whole request (s)':>18} {'segments':>9}")
    for row in rows:
        first = f"{row['first_segment_s']:.2f}" if row["first_segment_s"] is not None else "-"
        print(f"{row['endpoint']:<10} {row['run']:>3} {first:>18} {row['total_s']:>18.2f} "
              f"{row['segments'] if row['segments'] is not None else '':>9}")
    medians = {}
    for endpoint in ("/answer", "/analyze"):
        firsts = [r["first_segment_s"] for r in rows if r["endpoint"] == endpoint and r["first_segment_s"] is not None]
        medians[endpoint] = statistics.median(firsts) if firsts else None
    print("median first segment: " + ", ".join(f"{e} {s:.2f} s" if s is not None else f"{e} -"
                                               for e, s in medians.items()))
    if args.json_out:
        args.json_out.write_text(json.dumps({"video": str(video_path), "max_frames": args.max_frames,
                                             "runs": rows, "median_first_segment_s": medians}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
