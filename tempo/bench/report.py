"""The benchmark's report: each video's table of reference against ours, and the ratios behind it."""

from __future__ import annotations

import os

from .runs import PEAK_RUNS


def ratios(figures: dict) -> dict:
    ours, reference = figures["ours"], figures["reference"]
    peaks = ours["compressor_peak_mb"]
    return {
        "preprocess_speedup": reference["tensors_s"] / ours["tensors_s"],
        "preprocess_rss_reduction": reference["tensors_peak_mb"] / max(ours["tensors_peak_mb"], 1e-9),
        "followup_speedup": ours["follow_up_uncached"]["total_s"] / ours["follow_up"]["total_s"],
        "fast_seek_speedup": ours["first"]["total_s"] / ours["fast_seek"]["total_s"],
        "memory_128_vs_16": peaks[128] / max(peaks[16], 1e-9),
        "isolated_preprocess_cost": figures["isolated"]["tensors_s"] / ours["tensors_s"],
        "isolated_first_segment_cost": (figures["isolated"]["first"]["first_segment_s"]
                                        / ours["first"]["first_segment_s"]),
    }


def table(name: str, figures: dict) -> str:
    ours, reference, r = figures["ours"], figures["reference"], ratios(figures)
    rows = [
        ("file -> compressor-ready tensors (s)", reference["tensors_s"], ours["tensors_s"], r["preprocess_speedup"]),
        ("peak memory of that step (MB)", reference["tensors_peak_mb"], ours["tensors_peak_mb"],
         r["preprocess_rss_reduction"]),
        ("first segment result (s)", reference["first"]["first_segment_s"], ours["first"]["first_segment_s"],
         reference["first"]["first_segment_s"] / ours["first"]["first_segment_s"]),
        ("end to end with the model (s)", reference["first"]["total_s"], ours["first"]["total_s"],
         reference["first"]["total_s"] / ours["first"]["total_s"]),
        ("follow-up question (s)", ours["follow_up_uncached"]["total_s"], ours["follow_up"]["total_s"],
         r["followup_speedup"]),
        ("fast seek instead of exact sampling (s)", ours["first"]["total_s"], ours["fast_seek"]["total_s"],
         r["fast_seek_speedup"]),
    ]
    lines = [f"{name}: {figures['segments']} segments", f"| {'':40} | reference | ours | ratio |", "|---|---|---|---|"]
    lines += [f"| {label:40} | {a:9.2f} | {b:7.2f} | {ratio:5.1f}x |" for label, a, b, ratio in rows]
    isolated = figures["isolated"]
    lines.append(f"decoding in a child process, as the app does: file -> tensors {isolated['tensors_s']:.2f} s "
                 f"({r['isolated_preprocess_cost']:.2f}x in-process), first segment result "
                 f"{isolated['first']['first_segment_s']:.2f} s ({r['isolated_first_segment_cost']:.2f}x)")
    peaks = ours["compressor_peak_mb"]
    lines.append(f"compressor peak memory, median of {PEAK_RUNS}: {peaks[16]:.0f} MB at 16 segments, {peaks[128]:.0f} "
                 f"MB at 128 ({r['memory_128_vs_16']:.2f}x)")
    cached, uncached = ours["follow_up"], ours["follow_up_uncached"]
    same = (cached["answer"], cached["tokens"]) == (uncached["answer"], uncached["tokens"])
    verdict = "the same" if same else "NOT the same"
    lines.append(f"follow-up from the cache: {verdict} allocation and answer as uncached")
    start, end = figures["load_average"]
    lines.append(f"load average (1 min) at the start and the end: {start:.1f}, {end:.1f} on {os.cpu_count()} cores")
    return "\n".join(lines)
