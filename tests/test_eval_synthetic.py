"""The synthetic evaluation: its report's schema, and an oracle row that really allocates to the evidence."""

import json

import numpy as np
import pytest

from tempo.synthetic import ALL_FAMILIES, FAMILIES, Question, generate_video, make_questions
from tempo.train.eval_report import STRATEGIES, SWEEP_FRACTIONS, outside_video, paired_bootstrap
from tempo.train.eval_run import evaluate, graded
from tempo.train.eval_tables import format_outside, format_table
from tempo.train.eval_videos import questions_of
from tempo.train.eval_zoom import zoom_record, zoom_report
from tempo.train.evaluate import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import tempo

    model = tempo.from_pretrained(device="cpu")
    directory = tmp_path_factory.mktemp("eval-videos")
    return evaluate(model, n=1, seed=7, budget=None, min_duration=60.0, max_duration=60.0,
                    directory=str(directory), max_new_tokens=8)


def test_report_has_every_strategy_truncation_and_the_oracle(report):
    rows = [*report["strategies"].values(), *report["truncation"].values(), report["oracle"]]
    assert set(report["strategies"]) == set(STRATEGIES) and set(report["truncation"]) == {"head", "tail"}
    for row in rows:
        assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["localization"] <= 1.0
        assert set(row["per_family"]) == set(ALL_FAMILIES) and row["questions"] == len(ALL_FAMILIES)
        assert set(row["localization_per_family"]) == set(ALL_FAMILIES) - {"global"}
        outside = row["outside_video"]
        assert outside["of"] == 2 and set(outside["per_family"]) == {"grounding", "interval"}
        assert outside["answers"] == sum(c["answers"] for c in outside["per_family"].values()) <= 2
        assert 0.0 < row["tokens_per_frame"] <= 32 / 8 / 4 + 1e-9  # a quarter of k_max per 8-frame segment
    assert report["strategies"]["ata"] == report["truncation"]["head"]


def test_oracle_puts_the_most_tokens_on_the_evidence(report):
    # the ground-truth relevance: the most-allocated segment always overlaps the asked-about event
    assert report["oracle"]["localization"] == 1.0
    assert report["strategies"]["adversarial"]["localization"] < 1.0


def test_table_and_json_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "eval.json"
    assert main(["--n", "1", "--seed", "7", "--min-duration", "60", "--max-duration", "60",
                 "--videos-dir", str(tmp_path), "--json", str(out), "--families", ",".join(FAMILIES)]) == 0
    table = capsys.readouterr().out
    assert "| ATA on true relevance (oracle) |" in table and table.count("\n|") >= 8
    assert "| interval |" not in table and "| global | localization |" in table
    assert "ATA's answers naming a time outside the video: " in table and "(grounding " in table
    written = json.loads(out.read_text())
    assert written["oracle"]["questions"] == len(FAMILIES) and written["settings"]["families"] == list(FAMILIES)
    assert "ATA - uniform:" in table and "| 1/32 |" in table
    assert format_table(json.loads(out.read_text())).splitlines()[0].startswith("| allocation |")


def test_training_seeds_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        main(["--n", "2", "--seed", "999999", "--videos-dir", str(tmp_path)])
    with pytest.raises(SystemExit):
        main(["--n", "1", "--families", "needle,when", "--videos-dir", str(tmp_path)])


def test_the_first_four_families_are_asked_as_before_and_the_new_ones_after():
    for seed in (7, 300_000, 300_001):
        video = generate_video(seed, min_duration=60.0, max_duration=3600.0)
        asked = questions_of(video, seed, ALL_FAMILIES)
        assert asked[:4] == make_questions(video, np.random.default_rng(seed)) == questions_of(video, seed, FAMILIES)
        assert [q.family for q in asked] == list(ALL_FAMILIES)


def test_answers_naming_a_time_outside_the_video_are_counted_per_family():
    interval = Question("interval", "From when to when is the red star visible?", "From 10 to 14 seconds.",
                        ((10.0, 14.0),))
    grounding = Question("grounding", "When does the red star appear?", "At 12 seconds.", ((10.0, 14.0),))
    needle = Question("needle", "What colour is the star?", "red", ((10.0, 14.0),))
    records = [{"family": q.family, **graded(q, answer, 4.0, 60.0)} for q, answer in [
        (interval, "From 10 to 14 seconds."), (interval, "From 10 to 114 seconds."), (interval, "From -1 to 14."),
        (grounding, "At 112.0 seconds."), (grounding, "At 12.0 seconds."), (needle, "red 100")]]
    assert [r["correct"] for r in records] == [True, False, False, False, True, True]
    assert [r["outside"] for r in records] == [False, True, True, True, False, None]
    counts = outside_video(records)
    assert counts == {"answers": 3, "of": 5, "per_family": {"grounding": {"answers": 1, "of": 2},
                                                           "interval": {"answers": 2, "of": 3}}}
    assert format_outside(counts) == ("ATA's answers naming a time outside the video: 3 of 5 "
                                      "(grounding 1 of 2, interval 2 of 3)")


def test_paired_bootstrap_resamples_whole_videos():
    # video 0: ATA right on both questions, uniform on none; video 1: both right on one question of two
    ata, uniform, videos = [1, 1, 1, 0], [0, 0, 1, 0], [0, 0, 1, 1]
    margin = paired_bootstrap(ata, uniform, videos, resamples=4000, seed=1)
    assert margin["difference"] == 0.5 and margin["videos"] == 2
    # a resample holds video 0 twice (margin 1), once (0.5) or never (0): the interval spans exactly that
    assert margin["low"] == 0.0 and margin["high"] == 1.0
    assert paired_bootstrap([1, 1], [1, 1], [0, 1])["low"] == 0.0 == paired_bootstrap([1, 1], [1, 1], [0, 1])["high"]


def test_paired_bootstrap_interval_excludes_zero_for_a_consistent_margin():
    rng = np.random.default_rng(0)
    videos = np.repeat(np.arange(60), 4)
    uniform = rng.random(240) < 0.3
    ata = uniform | (rng.random(240) < 0.3)  # ATA right whenever uniform is, and on a third of the rest
    margin = paired_bootstrap(ata, uniform, videos)
    assert 0.0 < margin["low"] < margin["difference"] < margin["high"]
    assert abs(margin["difference"] - (ata.mean() - uniform.mean())) < 1e-12


def test_budget_sweep_runs_ata_and_uniform_at_every_fraction(report):
    sweep = report["budget_sweep"]
    assert sweep["fractions"] == list(SWEEP_FRACTIONS) and set(sweep["strategies"]) == {"ata", "uniform"}
    for rows in sweep["strategies"].values():
        assert len(rows) == len(SWEEP_FRACTIONS) and all(r["questions"] == len(ALL_FAMILIES) for r in rows)
    uniform = [r["tokens_per_frame"] for r in sweep["strategies"]["uniform"]]
    assert uniform == sorted(uniform) and uniform[-1] == 32 / 8  # every memory token at the full budget
    # at 1/32 of the tokens both keep one per segment: the same allocation, so the same answers
    assert sweep["strategies"]["ata"][0] == sweep["strategies"]["uniform"][0]
    assert sweep["ata_minus_uniform"][0]["difference"] == 0.0
    assert set(report["intervals"]) == {"ata_minus_uniform", "head_minus_tail"}


def test_sweep_plot_from_the_command_line(tmp_path):
    plot = tmp_path / "sweep.png"
    assert main(["--n", "1", "--seed", "7", "--min-duration", "60", "--max-duration", "60",
                 "--videos-dir", str(tmp_path), "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.with_suffix(".html").stat().st_size > 100_000
    with pytest.raises(SystemExit):
        main(["--n", "1", "--plot", str(plot), "--no-sweep", "--videos-dir", str(tmp_path)])


def test_localisation_only_agrees_with_the_full_evaluation(report, tmp_path, capsys):
    # uniform gives every segment the same count, so its most-allocated segment is the most relevant one
    out = tmp_path / "localisation.json"
    assert main(["--n", "1", "--seed", "7", "--min-duration", "60", "--max-duration", "60", "--localisation-only",
                 "--videos-dir", str(tmp_path), "--json", str(out)]) == 0
    alone = json.loads(out.read_text())
    assert alone["questions"] == len(ALL_FAMILIES) - 1  # the global question has no evidence to find
    assert alone["localization"] == pytest.approx(report["strategies"]["uniform"]["localization"])
    assert '"localization"' in capsys.readouterr().out


def test_zoom_is_reported_beside_ata_and_a_video_it_covers_answers_as_ata_does(report):
    zoom = report["zoom"]
    assert zoom["mode"] == "auto" and report["settings"]["zoom"] == "auto"
    assert zoom["zoomed"] == 0  # a one-minute video: 2 fps throughout, nothing to look closer at
    assert zoom["compressor_passes"] == {"no_zoom": len(ALL_FAMILIES), "zoom": len(ALL_FAMILIES)}
    row, = zoom["by_length"].values()
    assert row["zoom"] == row["no_zoom"]  # the engine's one pass answers exactly as ATA over the whole video


def test_zoom_report_compares_like_with_like_by_length():
    whole = [{"video": v, "family": f, "correct": c, "outside": None, "duration": d}
             for v, f, c, d in [(1, "grounding", False, 300.0), (2, "grounding", False, 2000.0),
                                (3, "needle", True, 2000.0), (4, "grounding", False, 3000.0)]]
    zoomed = [zoom_record(w, Question(w["family"], "q", "a", ((10.0, 20.0),)), {"correct": w["duration"] > 1000},
                          (0.0, 512.0) if w["duration"] > 1000 else None, w["duration"]) for w in whole]
    zoomed[2] = zoom_record(whole[2], Question("needle", "q", "a", ((900.0, 910.0),)), {"correct": True}, None,
                            2000.0)
    result = zoom_report(zoomed, whole, "auto")
    assert result["zoomed"] == 2 and result["compressor_passes"] == {"no_zoom": 4, "zoom": 6}
    assert result["window_has_evidence"] == 1.0
    assert set(result["by_length"]) == {"up to 10 min", "30-60 min"}
    far = result["by_length"]["30-60 min"]
    assert far["questions"] == 3 and far["no_zoom"]["per_family"]["grounding"] == 0.0
    assert far["zoom"]["per_family"]["grounding"] == 1.0
    assert result["when_zoom_minus_no_zoom"]["difference"] == pytest.approx(2 / 3)
