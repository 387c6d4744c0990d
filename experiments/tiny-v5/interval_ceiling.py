"""The interval family's ceiling by video length: how often an answer read off segments can reach IoU >= 0.5.

    PYTHONPATH=. python experiments/tiny-v5/interval_ceiling.py --seeds 300000 1000 \
        --json experiments/tiny-v5/interval-ceiling.json

For each video (1-60 minutes, drawn as the evaluation draws them) its interval question, the evaluation's sampling
(2 fps, at most 1,024 frames, 8-frame segments, the mp4 at 2 fps), and three answers a decoder could give:

- segments, as stage 8 trains (`compose.tag_answer`): from the first showing segment's tag to the last's, or the
  one showing segment's whole span;
- the union of the showing segments (tag - step/2 to tag + step/2), the other obvious rule;
- frames: the first to the last sampled frame showing it (+ one frame), what perfect frame-level reading gives.

Each again after zoom: the 512 s window centred on the event (max_frames / fps, kept inside the video, as the look
closer window is) sampled at the full 2 fps, i.e. zoom that looked in the right place. No model runs: this is what
the sampling allows, before the compressor or the decoder lose anything.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from tempo.config import SamplingConfig
from tempo.synthetic import INTERVAL_IOU, generate_video, named_seconds, temporal_iou, temporal_questions
from tempo.train.compose import tag_answer
from tempo.video import VideoInfo, uniform_plan

FILE_FPS = 2.0  # the evaluation writes its mp4s at the rate it samples (eval_videos.VIDEO_FPS)
BINS = {(60, 120): "1-2 min", (120, 300): "2-5 min", (300, 512): "5-8.5 min (2 fps)", (512, 1200): "8.5-20 min",
        (1200, 2400): "20-40 min", (2400, 3600.1): "40-60 min"}
RULES = ("segments", "union", "frames")


def answers(plan, event: tuple[float, float]) -> dict[str, tuple[float, float]]:
    """The three answers on this sampling, in seconds."""
    shown = [i for i in range(len(plan.segments))
             if any(event[0] <= t < event[1] for t in plan.segment_frame_times(i))]
    tags = plan.tag_times()
    step = plan.segment_frames / plan.real_fps
    start, end = named_seconds(tag_answer("interval", "", tags, step, shown[0], (shown[0], shown[-1])))
    frames = [t for t in plan.frame_times if event[0] <= t < event[1]]
    return {"segments": (start, end),
            "union": (tags[shown[0]] - step / 2, tags[shown[-1]] + step / 2),
            "frames": (frames[0], frames[-1] + 1 / plan.real_fps), "shown": len(shown), "step": step}


def sampled(duration: float, window: tuple[float, float] | None = None):
    info = VideoInfo("synthetic", round(duration * FILE_FPS), FILE_FPS, 512, 256, "synthetic")
    start, end = window or (None, None)
    return uniform_plan(info, SamplingConfig(start=start, end=end))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs=2, default=(300_000, 1000), metavar=("FIRST", "COUNT"))
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    rows: dict[tuple, dict[str, list]] = {b: {} for b in BINS}
    for seed in range(args.seeds[0], args.seeds[0] + args.seeds[1]):
        video = generate_video(seed)
        interval = next(q for q in temporal_questions(video) if q.family == "interval")
        event = interval.evidence[0]
        cell = rows[next(b for b in BINS if b[0] <= video.duration < b[1])]
        whole = answers(sampled(video.duration), event)
        window = SamplingConfig().closer_window((event[0] + event[1]) / 2, video.duration)
        zoomed = answers(sampled(video.duration, window), event) if window else whole
        for name, got in (("", whole), ("zoom, ", zoomed)):
            for rule in RULES:
                cell.setdefault(name + rule, []).append(temporal_iou(got[rule], event) >= INTERVAL_IOU)
        cell.setdefault("event seconds", []).append(event[1] - event[0])
        cell.setdefault("segment seconds", []).append(whole["step"])
        cell.setdefault("one segment shows it", []).append(whole["shown"] == 1)
    report = {BINS[span]: {"videos": len(cell["frames"]), **{k: round(float(np.mean(v)), 3) for k, v in cell.items()}}
              for span, cell in rows.items()}
    everything = {k: [x for cell in rows.values() for x in cell[k]] for k in rows[(60, 120)]}
    report["all"] = {"videos": len(everything["frames"]), **{k: round(float(np.mean(v)), 3)
                                                              for k, v in everything.items()}}
    print(json.dumps(report, indent=1))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"seeds": list(args.seeds), "iou": INTERVAL_IOU, "by_length": report}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
