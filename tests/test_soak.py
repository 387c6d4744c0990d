"""The soak's short form (`python -m benchmarks.soak --short`): app.py on loopback, 100 requests from 8 clients over 10
synthetic videos it has never seen, every endpoint and both MCP tools, repeats and a few hostile files. It passes
as the app is, and fails behind a planted per-video cache whose key ignores the video (answers mixed between
videos)."""

from __future__ import annotations

import csv
import json

import pytest

from benchmarks import soak
from benchmarks.server_watch import FROM_OWN_CLIENT, OWN_CLIENT
from benchmarks.soak.traffic import MIX

pytestmark = pytest.mark.slow


def test_the_short_soak_answers_every_request_about_its_own_video(tmp_path):
    report_file, samples_file = tmp_path / "soak.json", tmp_path / "samples.csv"
    assert soak.main(["--short", "--json", str(report_file), "--samples", str(samples_file)]) == 0
    report = json.loads(report_file.read_text())
    assert report["requests"] == 100 and report["other_errors"] == 0
    assert report["answered"] + report["refused_bad_input"] + report["refused_queue_full"] == 100
    assert report["pairs_repeated"] > 0 and report["pairs_whose_repeats_differ"] == 0
    assert report["answers_about_another_video"] == 0
    assert sum(report["by_endpoint"]["hostile"].values()) > 0
    assert all(sum(report["by_endpoint"][kind].values()) > 0 for kind in MIX)
    for key in ("rss_start_mb", "rss_peak_mb", "rss_last_half_mb_per_min", "fds_end", "uploads_mb_end", "tmp_mb_end"):
        assert key in report
    assert 0 < report["main_rss_end_mb"] <= report["rss_end_mb"]  # the server alone, then with its children
    assert 0 < report["pss_end_mb"] <= report["rss_end_mb"]  # shared pages counted once
    assert report["main_rss_growth_mb"] == report["main_rss_end_mb"] - report["main_rss_start_mb"]
    assert report["cache_cap_mb"] > 0 and report["main_rss_growth_within_cap"]  # 10 short videos stay far below
    # Back where they started, but for Gradio's MCP server's one connection to the app (opened at the first call).
    own = {f"server: {OWN_CLIENT}", f"server: {FROM_OWN_CLIENT}"}
    assert set(report["fds_left_open"]) <= own, report["fds_left_open"]
    samples = list(csv.DictReader(samples_file.open()))
    assert len(samples) >= 10 and float(samples[-1]["seconds"]) > float(samples[0]["seconds"])
    assert abs(max(float(s["main_mb"]) for s in samples) - report["main_rss_peak_mb"]) <= 1  # the same samples


def test_the_soak_fails_when_the_cache_mixes_two_videos(tmp_path):
    report_file = tmp_path / "soak.json"
    assert soak.main(["--short", "--requests", "30", "--videos", "4", "--plant-cache-bug",
                      "--json", str(report_file)]) == 1
    report = json.loads(report_file.read_text())
    assert report["planted_cache_bug"] and report["answers_about_another_video"] > 0
