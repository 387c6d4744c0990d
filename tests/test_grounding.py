"""The grounding metrics against values computed by hand from QVHighlights' and Charades-STA's definitions, on
files in the benchmarks' own formats; the synthetic world's export; and the command."""

import io
import json

import pytest

from tempo.cli import main as tempo_main
from tempo.errors import InputError
from tempo.eval import grounding, metrics
from tempo.eval.export import annotation, clip_saliency
from tempo.eval.formats import Annotation, Prediction, read_annotations, read_predictions
from tempo.eval.highlights import hit_at_one
from tempo.eval.observe import clip_saliency as clip_relevance
from tempo.events import Segment
from tempo.moments import Moment
from tempo.synthetic import Question

# Three queries in QVHighlights' jsonl. q1 has two truth windows, q2 one, q3 one with annotated clips.
ANNOTATIONS = [
    {"qid": 1, "query": "a dog runs", "duration": 40, "vid": "v1", "relevant_windows": [[0, 10], [20, 30]]},
    {"qid": 2, "query": "a cat sleeps", "duration": 20, "vid": "v2", "relevant_windows": [[5, 15]]},
    {"qid": 3, "query": "a bird sings", "duration": 10, "vid": "v3", "relevant_windows": [[2, 6]],
     "relevant_clip_ids": [1, 2], "saliency_scores": [[4, 2, 1], [3, 3, 3]]},
]
# The submission: windows [start, end, score] best first, and q3's saliency per 2-second clip (5 clips).
PREDICTIONS = [
    # top window against (20, 30): 8 / 12 = 2/3. As a ranking: right, wrong, right (already matched truth), right.
    {"qid": 1, "pred_relevant_windows": [[22, 32, 0.9], [50, 60, 0.8], [20, 31, 0.7], [0, 9, 0.6]]},
    # top window against (5, 15): 5 / 15 = 1/3
    {"qid": 2, "pred_relevant_windows": [[0, 10, 0.5], [5, 14, 0.4]]},
    # top window against (2, 6): 4 / 4 = 1; the most salient clip is clip 1, scored (4, 2, 1): a hit
    {"qid": 3, "pred_relevant_windows": [[2, 6, 0.8]], "pred_saliency_scores": [0.1, 0.9, 0.5, 0.2, 0.3]},
]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.fixture
def files(tmp_path):
    return (write_jsonl(tmp_path / "gt.jsonl", ANNOTATIONS), write_jsonl(tmp_path / "preds.jsonl", PREDICTIONS))


def test_recall_and_mean_iou_by_hand(files):
    scores = metrics.score(read_predictions(files[1]), read_annotations(files[0]))
    ious = [2 / 3, 1 / 3, 1.0]
    assert list(scores.per_query_iou.values()) == pytest.approx(ious, abs=1e-9)
    assert scores.recall[0.3] == pytest.approx(1.0, abs=1e-6)
    assert scores.recall[0.5] == pytest.approx(2 / 3, abs=1e-6)
    assert scores.recall[0.7] == pytest.approx(1 / 3, abs=1e-6)
    assert scores.mean_iou == pytest.approx(sum(ious) / 3, abs=1e-6)


def test_average_precision_by_hand(files):
    """q1 at 0.5: ranks 1 and 4 are hits (rank 3 overlaps best a truth window rank 1 took already), 2 truths:
    precision 1 at recall 1/2, 2/4 at recall 1, so AP = 1/2 * 1 + 1/2 * 1/2 = 3/4. At 0.75 rank 1 (IoU 2/3) misses,
    rank 3 (IoU 10/11 with (20, 30)) and rank 4 (0.9) hit: precision 1/3 then 2/4, the first raised to the best
    beyond it, 2/4: AP = 1/2 * 1/2 + 1/2 * 1/2 = 1/2. q2: rank 2 (IoU 0.9) hits, AP = 1/2 at both; q3: 1 at both."""
    scores = metrics.score(read_predictions(files[1]), read_annotations(files[0]))
    assert scores.average_precision[0.5] == pytest.approx((3 / 4 + 1 / 2 + 1) / 3, abs=1e-6)
    assert scores.average_precision[0.75] == pytest.approx((1 / 2 + 1 / 2 + 1) / 3, abs=1e-6)


def test_precision_is_the_best_at_that_recall_or_beyond():
    """Hits at ranks 1, 4, 5 of 3 truths: precision 1, 2/4, 3/5; the 2/4 counts as 3/5 (interpolated)."""
    truths = [(0, 10), (20, 30), (40, 50)]
    ranked = [(0, 10, 0.9), (60, 70, 0.8), (80, 90, 0.7), (20, 30, 0.6), (40, 50, 0.5)]
    assert metrics.average_precision(ranked, truths, 0.5) == pytest.approx((1 + 3 / 5 + 3 / 5) / 3, abs=1e-6)


def test_only_the_first_ten_windows_count():
    eleven = [(100 + i, 101 + i, 1.0 - i / 100) for i in range(10)] + [(0, 10, 0.99)]
    assert metrics.average_precision(eleven, [(0, 10)], 0.5) == 0.0
    # among the first ten it ranks second (one window scores 1.0): precision 1/2 at recall 1
    assert metrics.average_precision(eleven[-1:] + eleven[:9], [(0, 10)], 0.5) == pytest.approx(0.5, abs=1e-6)


def test_hit_at_one_by_hand():
    """Clip 1 is scored 4 by one annotator (a hit); clip 2 at most 3 (no hit); clip 4 not at all (no hit)."""
    truth = Annotation("3", "q", "v", ((2, 6),), 10.0, (1, 2), ((4, 2, 1), (3, 3, 3)))
    assert hit_at_one([0.1, 0.9, 0.5, 0.2, 0.3], truth, 10.0) == 1.0
    assert hit_at_one([0.1, 0.5, 0.9, 0.2, 0.3], truth, 10.0) == 0.0
    assert hit_at_one([0.1, 0.5, 0.5, 0.2, 0.9], truth, 10.0) == 0.0
    scores = metrics.score([Prediction("3", ((2, 6, 1.0),), (0.1, 0.5, 0.9, 0.2, 0.3))], [truth])
    assert scores.hit1 == 0.0


def test_charades_lines_score_without_saliency(tmp_path):
    path = tmp_path / "charades_sta_test.txt"
    path.write_text("3MSZA 24.3 30.4##person turn a light on.\nAB12C 0.0 6.9##a person is sitting.\n",
                    encoding="utf-8")
    truth = read_annotations(str(path))
    assert [(a.vid, a.intervals, a.query) for a in truth] == [("3MSZA", ((24.3, 30.4),), "person turn a light on."),
                                                             ("AB12C", ((0.0, 6.9),), "a person is sitting.")]
    guesses = [Prediction(truth[0].qid, ((24.3, 30.4, 1.0),)), Prediction(truth[1].qid, ((3.45, 10.35, 1.0),))]
    scores = metrics.score(guesses, truth)  # the second: 3.45 / 10.35 = 1/3
    assert (scores.recall[0.3], scores.recall[0.5], scores.hit1) == (1.0, 0.5, None)
    assert scores.mean_iou == pytest.approx((1 + 1 / 3) / 2, abs=1e-6)


def test_bad_files_say_what_is_wrong(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("3MSZA 24.3##no end\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: not a Charades-STA line"):
        read_annotations(str(path))
    with pytest.raises(ValueError, match="no prediction"):
        metrics.score([], [Annotation("1", "q", "v", ((0, 1),))])


def test_the_command_scores_a_submission(files, tmp_path, capsys):
    out = tmp_path / "metrics.json"
    assert tempo_main(["eval", "grounding", "--annotations", files[0], "--predictions", files[1], "--json",
                       str(out)]) == 0
    row = json.loads(out.read_text())["rows"]["predictions"]
    assert row["MR-full-R1@0.5"] == 66.67 and row["HL-min-VeryGood-Hit1"] == 100.0
    printed = capsys.readouterr().out
    assert "| MR-full-R1@0.5 | 66.67 |" in printed and "| MR-full-R1@0.3 | 100.00 |" in printed


def test_tempo_eval_grounding_is_the_same_command(files, tmp_path):
    out, err = tmp_path / "metrics.json", io.StringIO()
    assert tempo_main(["eval", "grounding", "--annotations", files[0], "--predictions", files[1], "--json",
                       str(out)]) == 0
    assert json.loads(out.read_text())["rows"]["predictions"]["MR-full-R1@0.5"] == 66.67
    assert tempo_main(["eval", "grounding", "--annotations", files[0]], err=err) == 2
    assert "give --videos" in err.getvalue()


def test_the_command_names_a_missing_video(files, tmp_path):
    err = io.StringIO()
    assert tempo_main(["eval", "grounding", "--annotations", files[0], "--videos", str(tmp_path)], err=err) == 2
    assert "v1" in err.getvalue()
    with pytest.raises(InputError, match="No video for 'v1'"):
        grounding.video_path(str(tmp_path), "v1")


def test_the_synthetic_export_holds_the_exact_truth():
    """A 3 s event from 5.0 s: clip 2 (4-6 s) has its middle on the edge (4 of 4), clip 3 (6-8 s) inside (4);
    a 2.1 s event from 8.4 s: clip 4 (8-10 s, its middle inside: 4), clip 5 (10-12 s, a quarter inside: 1)."""
    assert clip_saliency(((5.0, 8.0),), 20.0) == ((2, 4), (3, 4))
    assert clip_saliency(((8.4, 10.5),), 20.0) == ((4, 4), (5, 1))
    question = Question("interval", "From when to when is the red circle visible?", "From 5 to 8 seconds.",
                        ((5.0, 8.0),))
    record = annotation(question, 7, "synthetic-7", 20.0)
    assert (record.qid, record.intervals, record.clip_ids, record.saliency) == \
        ("7-interval", ((5.0, 8.0),), (2, 3), ((4, 4, 4), (4, 4, 4)))


def test_the_highlight_is_the_best_moment_s_middle():
    """Moments 10-20 s (0.9) and 30-34 s (0.8) in a 40 s video of 4 s segments: the clip at 14-16 s (its middle,
    15 s, is the best moment's) ranks first, then the others inside it, then the second moment's, then the rest by
    their segment's relevance (segment 0's 0.95 ranks below every clip in a moment)."""
    segments = [Segment(i, 4.0 * i, 4.0 * i + 4, 0.95 if i == 0 else 0.1) for i in range(10)]
    saliency = clip_relevance([Moment(10, 20, 0.9), Moment(30, 34, 0.8)], segments, (), 40.0)
    order = sorted(range(20), key=lambda c: -saliency[c])
    assert order[0] == 7 and set(order[:5]) == {5, 6, 7, 8, 9} and set(order[5:7]) == {15, 16}
    assert order[7] in (0, 1) and saliency[0] == 0.95


def test_the_export_without_videos_writes_the_annotations_alone(tmp_path):
    """--no-videos: the same records (vid named as the video would be), and no video rendered."""
    from tempo.eval.export import export
    from tempo.synthetic import generate_video

    records = export(7, 1, str(tmp_path), 60.0, 60.0, videos=False)
    video = generate_video(7, min_duration=60.0, max_duration=60.0)
    assert {a.vid for a in records} == {f"synthetic-7-{video.duration:.1f}s"}
    assert [a.qid for a in read_annotations(str(tmp_path / "annotations.jsonl"))] == [a.qid for a in records]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["annotations.jsonl", "charades.txt"]
