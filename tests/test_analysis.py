"""Issue 10's analysis tools from the library and the command line: other allocations of one compression, budget
sweeps, a segment's frames, the batch mode and the self-contained HTML report."""

from __future__ import annotations

import html
import io
import json
import shutil
from dataclasses import replace

import pytest

import tempo
from tempo import analysis, batch, cli, engine
from tempo.engine.request import sweep_budgets, sweep_configs
from tempo.render import report as share
from tempo.render.progress import RunProgress
from tempo.render.text import NO_ANSWER

QUESTION = "How many bikes pass the camera?"


def config(**allocation) -> tempo.RunConfig:
    return tempo.RunConfig(allocation=tempo.AllocationConfig(**{"budget": 64, **allocation}),
                           generation=tempo.GenerationConfig(max_new_tokens=6))


@pytest.fixture()
def bikes(fixtures, tmp_path):
    video = tmp_path / "bikes.mp4"
    shutil.copy(fixtures / "videos" / "bikes.mp4", video)
    return video


def test_another_allocation_of_a_compression_is_the_run_with_those_settings(fixture_model, bikes):
    cache = tempo.VideoCache()
    compression = engine.compress(fixture_model, bikes, QUESTION, config(), cache)
    for settings in (dict(strategy="uniform"), dict(budget=12, k_min=2), dict(truncation="tail"),
                     dict(strategy="off")):
        other = engine.reanswer(fixture_model, compression, config(**settings))
        direct = tempo.answer(fixture_model, bikes, QUESTION, config(**settings), tempo.VideoCache())
        assert (other.answer, [s.tokens for s in other.segments]) == \
            (direct.answer, [s.tokens for s in direct.segments]), settings
        assert other.config.allocation.strategy == settings.get("strategy", "ata")


def test_a_budget_sweep_goes_from_one_token_per_segment_to_every_memory_token(fixture_model, bikes):
    compression = engine.compress(fixture_model, bikes, QUESTION, config())
    k_max, n = fixture_model.spec.num_memory_tokens, len(compression.relevance)
    sweep = [engine.reanswer(fixture_model, compression, row) for row in sweep_configs(config(), n, k_max)]
    assert [r.budget for r in sweep] == sweep_budgets(n, k_max)
    assert sweep[0].budget == n and sweep[-1].budget == n * k_max
    assert (sweep[-1].tokens_used == n * k_max
            and sweep[-1].config.allocation.strategy == "off")  # everything, at the top
    assert {r.config.allocation.strategy for r in sweep[:-1]} == {"ata"}
    assert all(r.tokens_used <= r.budget for r in sweep) and all(r.answer for r in sweep)
    used = [r.tokens_used for r in sweep]
    assert used == sorted(used) and used[0] < used[-1]


@pytest.mark.parametrize("answer, expected", [("yellow", True), ("At 2:03.", True), ("", False), ("  ", False),
                                              ("orangeorangeorange", False), ("1024 frames", True),
                                              ("red red red", False), ("the the the cube", False), ("...", False)])
def test_an_answer_is_usable_unless_empty_or_looping(answer, expected):
    assert analysis.usable(answer) is expected


def test_sweep_budgets_are_log_spaced_and_distinct():
    assert sweep_budgets(38, 32) == [38, 76, 152, 304, 608, 1216]
    assert sweep_budgets(3, 2, count=6) == [3, 4, 5, 6]  # few distinct budgets: no repeats
    assert sweep_budgets(5, 1) == [5]


def test_changes_ranks_and_the_segments_that_changed_most():
    before, after = [4, 32, 4, 10, 4], [10, 4, 4, 10, 30]
    assert analysis.token_changes(before, after) == [6, -28, 0, 0, 26]
    assert analysis.most_changed(before, after, 2) == [1, 4]
    assert analysis.most_changed(before, before) == []
    assert analysis.relevance_ranks([0.2, 0.9, 0.5, 0.9]) == [4, 1, 3, 1]


def test_segment_frames_are_the_ones_the_run_sampled(fixture_model, fixtures):
    video = fixtures / "videos" / "shapes_40s_320x240.mp4"
    plan = engine.compress(fixture_model, video, QUESTION, config(), tempo.VideoCache()).plan
    frames, times = analysis.decode_segment(video, plan, 2)
    assert len(frames) == len(plan.segments[2]) == len(times)
    assert times == plan.segment_frame_times(2)
    assert max(frames[0].shape[:2]) <= analysis.SEGMENT_FRAME_EDGE
    with pytest.raises(tempo.InputError, match=f"segments 0 to {len(plan.segments) - 1}"):
        analysis.decode_segment(video, plan, len(plan.segments))


# ------------------------------------------------------------------------------------------------ batch

def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def write_jobs(path, jobs: list) -> None:
    path.write_text("".join((json.dumps(job) if isinstance(job, dict) else job) + "\n" for job in jobs))


@pytest.fixture()
def model_args(fixtures):
    return ["--model", str(fixtures / "tempo"), "--base", str(fixtures / "base" / "tiny-qwen3-vl")]


def test_a_batch_answers_every_job_records_failures_and_resumes(fixtures, tmp_path, model_args, monkeypatch):
    (tmp_path / "broken.mp4").write_text("not a video")
    shutil.copy(fixtures / "videos" / "bikes.mp4", tmp_path / "bikes.mp4")
    jobs = [{"id": "count", "video": "bikes.mp4", "question": QUESTION, "family": "counting"},
            {"id": "broken", "video": "broken.mp4", "question": "What happens?"},
            {"id": "uniform", "video": "bikes.mp4", "question": QUESTION, "strategy": "uniform", "budget": 30},
            {"id": "bad-budget", "video": "bikes.mp4", "question": QUESTION, "budget": "lots"},
            "this line is not JSON",
            {"id": "colour", "video": str(tmp_path / "bikes.mp4"), "question": "What colour is the first bike?"}]
    write_jobs(tmp_path / "jobs.jsonl", jobs)
    loads = []
    real = tempo.model.from_pretrained
    monkeypatch.setattr(tempo.model, "from_pretrained", lambda *a, **k: loads.append(1) or real(*a, **k))
    output, reports = tmp_path / "results.jsonl", tmp_path / "reports"
    code, _, err = run_cli("batch", "--input", str(tmp_path / "jobs.jsonl"), "--output", str(output),
                           "--reports", str(reports), "--max-new-tokens", "6", "--budget", "64", *model_args)
    assert code == 1 and len(loads) == 1
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["count", "broken", "uniform", "bad-budget", "line 5", "colour"]
    by_id = {line["id"]: line for line in lines}
    assert by_id["broken"] == {"id": "broken", "error": "broken.mp4 is not a readable video (unknown format or "
                                                        "damaged file)."}
    assert by_id["bad-budget"]["error"] == "Visual token budget must be a number (got 'lots')."
    assert set(by_id["line 5"]) == {"id", "error"}
    assert by_id["count"]["family"] == "counting" and by_id["count"]["answer"]
    assert by_id["uniform"]["settings"]["strategy"] == "uniform" and by_id["uniform"]["budget"] == 30
    assert by_id["count"]["settings"]["budget"] == 64 and by_id["count"]["tokens_used"] <= 64
    assert sorted(p.name for p in reports.iterdir()) == ["colour.html", "count.html", "uniform.html"]
    assert "3 answered, 0 skipped (already answered), 3 failed" in err and "ETA" in err

    # A second run retries the failures (now fixed) and skips what was answered.
    shutil.copy(fixtures / "videos" / "bikes.mp4", tmp_path / "broken.mp4")
    jobs[3]["budget"] = 40
    write_jobs(tmp_path / "jobs.jsonl", [job for job in jobs if job != "this line is not JSON"])
    answered = []
    run_job = batch.run_job
    monkeypatch.setattr(batch, "run_job", lambda model, job, *a: answered.append(job.id) or run_job(model, job, *a))
    code, _, err = run_cli("batch", "--input", str(tmp_path / "jobs.jsonl"), "--output", str(output),
                           "--max-new-tokens", "6", "--budget", "64", *model_args)
    assert code == 0 and answered == ["broken", "bad-budget"]
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == ["bad-budget", "broken", "colour", "count", "uniform"]
    assert all("answer" in line for line in lines)
    assert "2 answered, 3 skipped (already answered), 0 failed" in err


def test_a_batch_refuses_repeated_ids_and_a_missing_jobs_file(tmp_path, model_args):
    write_jobs(tmp_path / "jobs.jsonl", [{"id": 1, "video": "a.mp4", "question": "?"},
                                         {"id": "1", "video": "b.mp4", "question": "?"}])
    code, _, err = run_cli("batch", "--input", str(tmp_path / "jobs.jsonl"), "--output", str(tmp_path / "o.jsonl"),
                           *model_args)
    assert code == 2 and err.strip() == "error: jobs.jsonl: the id '1' is on lines 1 and 2; ids must be unique."
    code, _, err = run_cli("batch", "--input", str(tmp_path / "none.jsonl"), "--output", str(tmp_path / "o.jsonl"),
                           *model_args)
    assert code == 2 and "No jobs file at" in err


def test_report_names_are_safe_file_names():
    assert batch.report_name("video 1/question?") == "video_1_question.html"
    assert batch.report_name("../..") == "job.html"


# ------------------------------------------------------------------------------------------------ the report

def test_the_cli_writes_a_self_contained_report(fixtures, model_args, tmp_path):
    page = tmp_path / "run.html"
    code, out, err = run_cli("ask", "--video", str(fixtures / "videos" / "bikes.mp4"), "--question", QUESTION,
                             "--max-new-tokens", "6", "--report", str(page), *model_args)
    assert code == 0, err
    text = page.read_text()
    assert "<script" in text and "Plotly" in text and "data:image/jpeg;base64," in text
    assert QUESTION in text and out.strip() in text
    assert "src='http" not in text and 'src="http' not in text  # nothing loaded from elsewhere


def test_the_filmstrip_colours_follow_the_tokens():
    assert share.token_colour(4, 4, 32) == "rgb(203, 213, 225)"  # squeezed to k_min: grey
    assert share.token_colour(32, 4, 32) == "rgb(220, 38, 38)"  # kept k_max: red
    assert share.token_colour(18, 4, 32) == "rgb(212, 126, 132)"  # halfway


def test_the_report_marks_an_examples_expected_answer(fixture_model, bikes):
    finished = tempo.answer(fixture_model, bikes, QUESTION, config())
    truth = share.Truth("3", ((1.0, 2.0),), False)
    text = share.html_report([share.Asked(RunProgress(QUESTION, finished=replace(finished, answer="two")), truth)],
                             model="test")
    assert "Expected: 3 · the answer is wrong" in text
    assert "<div class='answer'>two</div>" in text
    silent = share.html_report([share.Asked(RunProgress(QUESTION, finished=replace(finished, answer=" ")))],
                               model="test")
    assert f"<div class='answer'>{html.escape(NO_ANSWER)}</div>" in silent
    both = share.html_report([share.Asked(RunProgress("First?", finished=finished)),
                              share.Asked(RunProgress("Second?", finished=replace(finished, answer="two")))],
                             model="test")
    assert both.count("<section>") == 2 and "Question 2" in both and both.count("plotly.js v") == 1
