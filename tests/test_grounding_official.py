"""QVHighlights' brief, its keys and values, against values worked out by hand from the rules of the benchmark's
own evaluation (`standalone_eval/eval.py` and `utils.py` as moment_detr ships it, read, not copied): the last of
tied true intervals, its two IoU formulas, the first ten intervals, the length ranges, the highlight metrics, and
the queries its command stops on. Each file here was also run through that code, unchanged, outside the
repository: its brief equals every value below to 0.01 (on the files it can read)."""

import json
import logging

import numpy as np
import pytest

from tempo.cli import main as tempo_main
from tempo.errors import InputError
from tempo.eval import metrics
from tempo.eval.formats import Prediction, read_annotations, read_predictions, write_predictions
from tempo.eval.highlights import ranking_precision

SALIENT = {"relevant_clip_ids": [0], "saliency_scores": [[4, 4, 4]]}  # clip 0 very good to all three annotators
FIRST = [1.0, 0.0]  # predicted saliency with clip 0 first: every highlight metric 1
ELEVEN = ([[2 * i, 2 * i + 2, 0.9 - 0.05 * i] for i in range(4)] + [[41, 50, 0.7]]
          + [[10 + 2 * i, 12 + 2 * i, 0.6 - 0.05 * i] for i in range(5)] + [[40, 50, 0.99]])
RULES_TRUTH = [
    {"qid": 1, "query": "q", "vid": "a", "duration": 30, "relevant_windows": [[0, 10], [10, 20]], **SALIENT},
    {"qid": 2, "query": "q", "vid": "b", "duration": 30, "relevant_windows": [[16.5, 24.0]], **SALIENT},
    {"qid": 3, "query": "q", "vid": "c", "duration": 30, "relevant_windows": [[11.1, 20.2]], **SALIENT},
    {"qid": 4, "query": "q", "vid": "d", "duration": 60, "relevant_windows": [[40, 50]], **SALIENT},
    {"qid": 5, "query": "q", "vid": "e", "duration": 150, "relevant_windows": [[0, 5], [20, 40], [60, 100]],
     **SALIENT},
]
RULES_PREDICTED = [
    {"qid": 1, "pred_relevant_windows": [[0, 20, 0.9], [0, 10, 0.8]], "pred_saliency_scores": FIRST},
    {"qid": 2, "pred_relevant_windows": [[11.1, 26.1, 0.9]], "pred_saliency_scores": FIRST},
    {"qid": 3, "pred_relevant_windows": [[10.0, 23.0, 0.8]], "pred_saliency_scores": FIRST},
    {"qid": 4, "pred_relevant_windows": ELEVEN, "pred_saliency_scores": FIRST},
    {"qid": 5, "pred_relevant_windows": [[60, 100, 0.9], [20, 40, 0.8], [0, 4, 0.7]], "pred_saliency_scores": FIRST},
]
# Per query, AP at the ten thresholds 0.5:0.95 (the headline is their mean), and the top interval's IoU:
# q1, touching truths: [0, 20] has IoU 1/2 with both; the last is taken, so [0, 10] (rank 2) takes the other: AP 1
#     at 0.5. From 0.55 only rank 2 hits, 1 of 2 truths at precision 1/2: AP 1/4. Mean 0.325. R1 takes the first of
#     the tie, [0, 10]: IoU 10/20 = 0.5.
# q2, 7.5 / 15 = 0.5 exactly: over the lengths (7.5 + 15 - 7.5) it is 0.5 in floating point (mAP hit at 0.5);
#     over the span (26.1 - 11.1) it falls a bit short (R1@0.5 missed). AP 1 at 0.5 only: mean 0.1.
# q3, 9.1 / 13 = 0.7 exactly: the other way round: over the lengths a bit short of 0.7 (AP 1 at 0.5-0.65, mean 0.4),
#     over the span 0.7 (R1@0.7 hit).
# q4, eleven intervals: the eleventh, [40, 50] scored 0.99, does not count; [41, 50] at rank 5 has IoU 0.9: AP 1/5
#     up to 0.9, 0 at 0.95, mean 0.18. The top interval, [0, 2], misses: IoU 0.
# q5, three truths of 5, 20 and 40 s: ranks 1 and 2 hit exactly, rank 3 [0, 4] has IoU 0.8: AP 1 up to 0.8, then
#     2/3 (recall 2/3 at precision 1): mean 0.9. IoU 1.
# By length (short: up to 10 s, middle: 10-30 s, long: 30-150 s), a query keeps only its truths in the range:
# short: q1-q4 as above (10 s is short) and q5 on [0, 5] alone, where [0, 4] is rank 3: AP 1/3 up to 0.8, mean 7/30;
# middle: q5 on [20, 40] alone, hit at rank 2: 1/2; long: q5 on [60, 100], hit at rank 1: 1.
RULES_BRIEF = {
    "MR-full-mAP": (0.325 + 0.1 + 0.4 + 0.18 + 0.9) / 5, "MR-full-mAP@0.5": (1 + 1 + 1 + 0.2 + 1) / 5,
    "MR-full-mAP@0.75": (0.25 + 0 + 0 + 0.2 + 1) / 5, "MR-full-R1@0.5": 3 / 5, "MR-full-R1@0.7": 2 / 5,
    "MR-short-mAP": (0.325 + 0.1 + 0.4 + 0.18 + 7 / 30) / 5, "MR-middle-mAP": 0.5, "MR-long-mAP": 1.0,
    "MR-full-R1@0.3": 4 / 5, "MR-full-mIoU": (0.5 + 0.5 + 0.7 + 0 + 1) / 5,
    **{f"HL-min-{level}-{name}": 1.0 for level in ("Fair", "Good", "VeryGood") for name in ("mAP", "Hit1")}}

# Three windows in each query, one per length range, so that the benchmark's command can run on the file (it stops
# on an empty range); predicted exactly, ranked short, middle, long: mAP 1 (short 1, middle 1/2, long 1/3).
SPANS = {"relevant_windows": [[2, 6], [10, 30], [40, 80]]}
EXACT = {"pred_relevant_windows": [[2, 6, 0.9], [10, 30, 0.8], [40, 80, 0.7]]}
HIGHLIGHT_TRUTH = [
    {"qid": "h1", "query": "q", "vid": "a", "duration": 10, **SPANS, "relevant_clip_ids": [1, 2, 3],
     "saliency_scores": [[4, 2, 1], [3, 3, 3], [1, 4, 2]]},
    {"qid": "h2", "query": "q", "vid": "b", "duration": 8, **SPANS, "relevant_clip_ids": [0],
     "saliency_scores": [[2, 2, 2]]},
    {"qid": "h3", "query": "q", "vid": "c", "duration": 8, **SPANS, "relevant_clip_ids": [0],
     "saliency_scores": [[4, 4, 4]]},
]
HIGHLIGHT_PREDICTED = [
    {"qid": "h1", **EXACT, "pred_saliency_scores": [0.1, 0.9, 0.5, 0.5, 0.3]},
    {"qid": "h2", **EXACT, "pred_saliency_scores": [0.2, 0.8, 0.1, 0.1, 0.7, 0.9]},
    {"qid": "h3", **EXACT},  # no saliency: left out of the highlights (the benchmark's command stops on it)
]
# h1, clips c0-c4 ranked by saliency: c1 (0.9), then c2 and c3 together (0.5), c4, c0. An annotator's relevant
# clips at a level give one term per score that brings in a relevant clip: the best precision from there on.
#   Fair (2+): annotator 1 {c1, c2}: 1 then 2/3, AP 5/6; annotator 2 {c1, c2, c3}: 1, 1, AP 1; annotator 3
#   {c2, c3}: 2/3. Mean (5/6 + 1 + 2/3) / 3 = 5/6. Good (3+): {c1, c2} 5/6; {c2, c3} 2/3; {c2} 1/3: mean 11/18.
#   VeryGood (4): {c1} 1; {c3} 1/3 (it enters with c2 at 0.5: 1 of 3); none: 0. Mean 4/9.
#   HIT@1: c1 scored (4, 2, 1) reaches every level.
# h2, four clips: the saliency is cut to them (0.2, 0.8, 0.1, 0.1); c0 relevant only at Fair, to all three, found
# second: AP 1/2; none relevant at Good or VeryGood: 0. Its top saliency (0.9) is on clip 5, past the video: no hit.
HIGHLIGHT_BRIEF = {"HL-min-Fair-mAP": (5 / 6 + 1 / 2) / 2, "HL-min-Fair-Hit1": 0.5,
                   "HL-min-Good-mAP": (11 / 18 + 0) / 2, "HL-min-Good-Hit1": 0.5,
                   "HL-min-VeryGood-mAP": (4 / 9 + 0) / 2, "HL-min-VeryGood-Hit1": 0.5,
                   "MR-short-mAP": 1.0, "MR-middle-mAP": 0.5, "MR-long-mAP": 1 / 3}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def scored(tmp_path, truth, predicted, protocol="ours"):
    annotations = read_annotations(write_jsonl(tmp_path / "truth.jsonl", truth))
    return metrics.score(read_predictions(write_jsonl(tmp_path / "predicted.jsonl", predicted)), annotations,
                         None, protocol)


def check(brief, expected):
    """Each expected value (a fraction) against the brief's percent to two decimals."""
    for key, value in expected.items():
        assert brief[key] == pytest.approx(100 * value, abs=0.005 + 1e-9), key


@pytest.mark.parametrize("protocol", metrics.PROTOCOLS)
def test_the_rules_by_hand(tmp_path, protocol):
    scores = scored(tmp_path, RULES_TRUTH, RULES_PREDICTED, protocol)
    check(scores.brief(), RULES_BRIEF)
    assert scores.full_precision == pytest.approx(RULES_BRIEF["MR-full-mAP"], abs=1e-6)
    assert scores.by_length["short"] == pytest.approx(RULES_BRIEF["MR-short-mAP"], abs=1e-6)
    assert scores.refused == {}


def test_touching_truths_go_to_the_last():
    """[0, 20] ties at IoU 1/2 with [0, 10] and [10, 20]: it takes [10, 20], so [0, 10] at rank 2 is a hit too;
    with the truths in the other order it takes [0, 10], and rank 2 misses: precision 1 at recall 1/2."""
    ranked = [(0, 20, 0.9), (0, 10, 0.8)]
    assert metrics.average_precision(ranked, [(0, 10), (10, 20)], 0.5) == pytest.approx(1.0, abs=1e-6)
    assert metrics.average_precision(ranked, [(10, 20), (0, 10)], 0.5) == pytest.approx(0.5, abs=1e-6)


def test_an_iou_on_a_threshold_follows_each_formula():
    """9.1 / 13 is 0.7 exactly: short of it over the lengths (mAP), on it over the span (R1), in floating point."""
    assert metrics.overlap_iou((10.0, 23.0), (11.1, 20.2)) < 0.7
    assert metrics.average_precision([(10.0, 23.0, 1.0)], [(11.1, 20.2)], 0.7) == 0.0
    assert metrics.average_precision([(11.1, 26.1, 1.0)], [(16.5, 24.0)], 0.5) == 1.0


def test_ranking_precision_takes_ties_together():
    """Relevant c3 enters with irrelevant c2 at 0.5 after irrelevant c1: one term, 1 of 3 (h1, VeryGood); with c1
    and c2 relevant, 1 at c1, then 2 of 3: 5/6 (h1, Fair, annotator 1). Values as the benchmark's `get_ap` gives."""
    relevant = [False, False, False, True, False]
    predicted = [0.1, 0.9, 0.5, 0.5, 0.3]
    assert ranking_precision(np.array(relevant), np.array(predicted)) == pytest.approx(1 / 3, abs=1e-6)
    assert ranking_precision(np.array([False, True, True, False, False]), np.array(predicted)) == \
        pytest.approx(5 / 6, abs=1e-6)
    # c0, c2, c3 relevant: c2 and c3 enter together at 2 of 3, c0 last at 3 of 5; the terms are averaged, not
    # weighted by how much recall each brings: (2/3 + 3/5) / 2 = 19/30 (weighted it would be 29/45)
    assert ranking_precision(np.array([True, False, True, True, False]), np.array(predicted)) == \
        pytest.approx(19 / 30, abs=1e-6)


@pytest.mark.parametrize("protocol", metrics.PROTOCOLS)
def test_the_highlight_metrics_by_hand(tmp_path, protocol):
    scores = scored(tmp_path, HIGHLIGHT_TRUTH, HIGHLIGHT_PREDICTED, protocol)
    check(scores.brief(), HIGHLIGHT_BRIEF)
    assert scores.highlights is not None
    assert scores.highlights["Good"][0] == pytest.approx(11 / 36, abs=1e-6)
    assert scores.highlights["VeryGood"][0] == pytest.approx(2 / 9, abs=1e-6)
    assert scores.hit1 == 0.5 and list(scores.refused) == ["h3"]


def test_a_query_without_an_interval_by_protocol(tmp_path):
    """n2 has no interval. Ours: a miss, so half of every interval metric; official: n1 alone, all as exact."""
    truth = [{"qid": q, "query": "q", "vid": q, "duration": 90, **SPANS} for q in ("n1", "n2")]
    predicted = [{"qid": "n1", **EXACT}, {"qid": "n2", "pred_relevant_windows": []}]
    ours = scored(tmp_path, truth, predicted, "ours")
    official = scored(tmp_path, truth, predicted, "official")
    one = {"MR-full-mAP": 1.0, "MR-full-R1@0.5": 1.0, "MR-full-mIoU": 1.0, "MR-middle-mAP": 0.5,
           "MR-long-mAP": 1 / 3}
    check(official.brief(), one)
    check(ours.brief(), {key: value / 2 for key, value in one.items()})
    assert (ours.queries, official.queries) == (2, 1)
    assert list(official.refused) == ["n2"] and "no predicted interval" in official.refused["n2"]
    assert official.brief()["HL-min-VeryGood-Hit1"] is None


def test_an_empty_length_range_is_none(tmp_path):
    truth = [{"qid": 1, "query": "q", "vid": "v", "duration": 30, "relevant_windows": [[0, 10]]}]
    brief = scored(tmp_path, truth, [{"qid": 1, "pred_relevant_windows": [[0, 10, 1.0]]}]).brief()
    assert (brief["MR-short-mAP"], brief["MR-middle-mAP"], brief["MR-long-mAP"]) == (100.0, None, None)


def test_the_command_prints_the_brief_and_warns_under_the_official_protocol(tmp_path, capsys, caplog):
    truth = write_jsonl(tmp_path / "truth.jsonl", HIGHLIGHT_TRUTH)
    predicted = write_jsonl(tmp_path / "predicted.jsonl", HIGHLIGHT_PREDICTED)
    out = tmp_path / "metrics.json"
    with caplog.at_level(logging.WARNING):
        assert tempo_main(["eval", "grounding", "--annotations", truth, "--predictions", predicted,
                           "--protocol", "official", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| HL-min-Good-mAP | 30.56 |" in printed and "| MR-long-mAP | 33.33 |" in printed
    assert "would stop on qid h3: no pred_saliency_scores" in caplog.text
    report = json.loads(out.read_text())
    assert report["protocol"] == "official" and report["rows"]["predictions"]["HL-min-Fair-mAP"] == 66.67


@pytest.mark.parametrize("window, says", [([5, 2, 1.0], "end not before the start"),
                                           (["NaN", 2, 1.0], "finite seconds"),
                                           ([0, 2, float("inf")], "score inf is not a finite number")])
def test_a_bad_window_is_refused_with_its_line(tmp_path, window, says):
    record = {"qid": 1, "pred_relevant_windows": [[float(v) if v == "NaN" else v for v in window]]}
    path = write_jsonl(tmp_path / "predicted.jsonl", [{"qid": 0, "pred_relevant_windows": [[0, 1, 1]]}, record])
    with pytest.raises(InputError, match=f"line 2: .*{says}"):
        read_predictions(path)


def test_an_unknown_protocol_is_named(tmp_path):
    with pytest.raises(ValueError, match="unknown protocol 'paper': choose one of ours, official"):
        scored(tmp_path, RULES_TRUTH[:1], RULES_PREDICTED[:1], "paper")


def test_a_written_submission_reads_back_exactly(tmp_path):
    """Saliency 2.0 + 1e-8 and 2.0 differ in the ninth digit (the highlight is a moment's middle by a hair): the file
    keeps them apart, so the benchmark's command ranks the clips as the scores here did."""
    written = [Prediction("1", ((12.34567891, 15.2, 0.912345678),), (2.0, 2.0 + 1e-8, 0.1))]
    write_predictions(written, str(tmp_path / "p.jsonl"))
    assert read_predictions(str(tmp_path / "p.jsonl")) == written


@pytest.mark.parametrize("protocol, queries, mean_precision", [("ours", 2, 50.0), ("official", 1, 100.0)])
def test_the_model_rows_follow_the_protocol(tmp_path, protocol, queries, mean_precision):
    """Kept observations, so no model runs: the decoder said 0-10 s for o1 (its truth exactly: 100 at every
    threshold) and named no interval for o2, a miss under ours and left out under official."""
    truth = [{"qid": q, "query": "q", "vid": "v", "duration": 40, "relevant_windows": [[0, 10]]} for q in ("o1", "o2")]
    segments = [[4.0 * i, 4.0 * i + 4, 0.9 if i < 3 else 0.1] for i in range(10)]
    seen = [{"qid": q, "duration": 40.0, "answer": said, "seconds": 1.0, "segments": segments, "window": []}
            for q, said in (("o1", "From 0 to 10 seconds."), ("o2", "I cannot tell."))]
    out = tmp_path / "metrics.json"
    assert tempo_main(["eval", "grounding", "--annotations", write_jsonl(tmp_path / "truth.jsonl", truth),
                       "--videos", str(tmp_path), "--observations", write_jsonl(tmp_path / "seen.jsonl", seen),
                       "--protocol", protocol, "--json", str(out)]) == 0
    answer = json.loads(out.read_text())["rows"]["answer"]
    assert (answer["queries"], answer["MR-full-mAP"], answer["MR-full-R1@0.7"]) == (queries, mean_precision,
                                                                                   mean_precision)
    assert answer["refused"] == {"o2": "no predicted interval (its R1 stops with an IndexError)"}
