"""`tempo eval grounding`: Tempo as a moment retriever, scored with the temporal-grounding benchmarks'
metrics on their own files (QVHighlights' jsonl, Charades-STA's lines).

Each query is run once (`observe`): the whole video's relevance, zoom's window's, and the decoder's answer to it
asked from when to when. The three rows of the table are then read off: relevance alone (the compressor, no
decoder), relevance with zoom, the decoder's interval answer. What each query saw is kept in `--observations`, so
a stopped run resumes where it was and the metrics can be computed again without the model."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence

from ..command_line import run_alone
from ..config import GenerationConfig, RunConfig
from ..engine import VideoCache
from ..errors import InputError
from ..model import from_pretrained
from .formats import Annotation, read_annotations, read_predictions, write_predictions
from .metrics import LENGTHS, PROTOCOLS, Scores, score
from .observe import ROW_NAMES, ROWS, Observation, observe, predictions

log = logging.getLogger(__name__)

VIDEO_ENDINGS = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".MP4")
ANSWER_TOKENS = 48  # an interval answer is a sentence
CACHE_BYTES = 8 * 2**30  # hold a video's work between its queries (the benchmarks ask several per video)


def video_path(directory: str, vid: str) -> str:
    """The file of video `vid` in `directory` (named as the annotations name it, any usual container)."""
    for ending in VIDEO_ENDINGS:
        path = os.path.join(directory, vid + ending)
        if os.path.isfile(path):
            return path
    raise InputError(f"No video for {vid!r} in {directory} (looked for {vid}{{{','.join(VIDEO_ENDINGS)}}}).")


def load_observations(path: str | None) -> dict[str, Observation]:
    """The queries already observed (a previous run's file), by qid."""
    if not path or not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return {o.qid: o for o in (Observation.from_dict(json.loads(line)) for line in f if line.strip())}


def run_queries(annotations: Sequence[Annotation], videos: str, model_name: str | None, keep: str | None,
                answer: bool = True) -> list[Observation]:
    """Every annotation observed (those in `keep` already are read back), appending each new one to `keep`."""
    known = load_observations(keep)
    todo = [a for a in annotations if a.qid not in known]
    for a in todo:
        video_path(videos, a.vid)  # every video is found before the first is compressed
    if todo:
        model = from_pretrained(model_name)
        config = RunConfig(generation=GenerationConfig(max_new_tokens=ANSWER_TOKENS))
        cache = VideoCache(max_bytes=CACHE_BYTES)
        started = time.perf_counter()
        for done, a in enumerate(sorted(todo, key=lambda a: a.vid), 1):
            observation = observe(model, video_path(videos, a.vid), a.qid, a.query, config, cache, answer)
            known[a.qid] = observation
            if keep:
                with open(keep, "a", encoding="utf-8") as f:
                    f.write(json.dumps(observation.to_dict()) + "\n")
            elapsed = time.perf_counter() - started
            log.info("query %d/%d (%s, %.0f s video): %.1f s; %.0f s elapsed, about %.0f s left", done, len(todo),
                     a.qid, observation.duration, observation.seconds, elapsed, elapsed / done * (len(todo) - done))
    return [known[a.qid] for a in annotations]


def evaluate(annotations: Sequence[Annotation], observations: Sequence[Observation],
             rows: Sequence[str] = ROWS, protocol: str = "ours") -> dict[str, Scores]:
    """Each row's metrics over the annotations."""
    durations = {o.qid: o.duration for o in observations}
    predicted = [predictions(o) for o in observations]
    return {row: score([p[row] for p in predicted], annotations, durations, protocol) for row in rows}


def table(results: dict[str, Scores]) -> str:
    """The results as a Markdown table: one line per key of QVHighlights' brief (then Charades-STA's R1@0.3 and
    mIoU), one column per row, in percent to two decimals as the benchmark's command writes them."""
    briefs = {row: s.brief() for row, s in results.items()}
    keys = list(next(iter(briefs.values())))
    lines = ["| | " + " | ".join(ROW_NAMES.get(row, row) for row in briefs) + " |", "|---" * (len(briefs) + 1) + "|"]
    for key in keys:
        lines.append(f"| {key} | " + " | ".join("–" if b[key] is None else f"{b[key]:.2f}" for b in briefs.values())
                     + " |")
    return "\n".join(lines)


def warn_refusals(results: dict[str, Scores]) -> None:
    """Log each query and length range QVHighlights' own command would stop on (the official protocol's caveat)."""
    for row, s in results.items():
        for qid, why in s.refused.items():
            log.warning("%s: the benchmark's command would stop on qid %s: %s", row, qid, why)
        for name, value in s.by_length.items():
            if value is None:
                log.warning("%s: no true interval is %s (%g-%g s): the benchmark's command stops on an empty "
                            "length range", row, name, *LENGTHS[name])


DESCRIPTION = "Tempo as a moment retriever, scored with the temporal-grounding benchmarks' metrics on their files."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--annotations", required=True,
                        help="QVHighlights jsonl (*.jsonl) or Charades-STA lines (vid start end##sentence)")
    parser.add_argument("--videos", help="the folder of the videos, each named by its vid (vid.mp4, ...)")
    parser.add_argument("--predictions", help="score this QVHighlights submission file instead of running a model")
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"),
                        help="a checkpoint (folder or hub name; default: the embedded Tempo-Tiny)")
    parser.add_argument("--observations", help="keep what each query saw here (jsonl); a rerun resumes from it")
    parser.add_argument("--no-answer", action="store_true", help="skip the decoder: the relevance rows only")
    parser.add_argument("--limit", type=int, help="only the first N queries")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="ours",
                        help="ours (default): a query with no interval is a miss; official: as QVHighlights' "
                             "functions, over the queries that have one, naming each its command would refuse")
    parser.add_argument("--json", dest="json_out", help="write the metrics here")
    parser.add_argument("--write-predictions", metavar="DIR",
                        help="write each row's predictions as a QVHighlights submission file in DIR")


def run(args: argparse.Namespace) -> int:
    """Score a submission file, or run the model on each query and score its three rows; prints the table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    try:
        annotations = read_annotations(args.annotations)[:args.limit]
        if args.predictions:
            results = {"predictions": score(read_predictions(args.predictions), annotations, None, args.protocol)}
        elif not args.videos:
            raise InputError("give --videos (to run the model) or --predictions (to score a file)")
        else:
            observations = run_queries(annotations, args.videos, args.model, args.observations, not args.no_answer)
            rows = tuple(r for r in ROWS if r != "answer" or not args.no_answer)
            results = evaluate(annotations, observations, rows, args.protocol)
            if args.write_predictions:
                os.makedirs(args.write_predictions, exist_ok=True)
                predicted = [predictions(o) for o in observations]
                for row in rows:
                    write_predictions([p[row] for p in predicted], os.path.join(args.write_predictions,
                                                                               f"{row}.jsonl"))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if args.protocol == "official":
        warn_refusals(results)
    print(table(results))
    if args.json_out:
        report = {"annotations": os.path.abspath(args.annotations), "queries": len(annotations),
                  "model": None if args.predictions else args.model or "Tempo-Tiny (assets/tempo-tiny)",
                  "predictions": args.predictions and os.path.abspath(args.predictions), "protocol": args.protocol,
                  "rows": {row: s.to_dict() for row, s in results.items()},
                  "top_iou": {row: s.per_query_iou for row, s in results.items()}}
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_alone("python -m tempo.eval.grounding", DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
