"""The GPU check's JSON at a glance: the headline keys every run has at its top (so that runs can be compared), and
the verdicts, what the run shows to be wrong (the check exits 1 on any)."""

from __future__ import annotations

from tempo.conformance.report import BF16_RTOL

HEADLINE = ("device", "hour_seconds", "followup_seconds", "cold_call_seconds", "per_token_ms", "peak_memory_gb",
            "vision_mfu", "compressor_mfu", "prefill_mfu", "compressor_speedup", "conformance", "loader_cause",
            "loader_remedy")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 3)


def headline(figures: dict) -> None:
    """The headline keys, from the parts' figures (None where a part is missing)."""
    parts = figures["parts"]
    conformance = parts.get("conformance", {})
    if "float32" in conformance:
        f32, b16 = conformance["float32"], conformance["bfloat16"]
        figures["conformance"] = (f"{f32['passed']}/{f32['checks']} float32, {b16['passed']}/{b16['checks']} bf16 "
                                  f"within {BF16_RTOL:.0e} ({b16['discrete_flipped']} of {b16['discrete']} "
                                  "discrete results flipped)")
    hour = parts.get("hour", {})
    figures["hour_seconds"] = hour.get("total_s")
    figures["followup_seconds"] = parts.get("follow_ups", {}).get("asked_again", {}).get("total_s")
    figures["cold_call_seconds"] = parts.get("cold_call", {}).get("cold_call_s")
    figures["per_token_ms"] = _ms(hour.get("timings", {}).get("per_token"))
    peaks = [p.get("peak_memory_gb") for p in (hour, parts.get("ten_minutes", {})) if p.get("peak_memory_gb")]
    figures["peak_memory_gb"] = max(peaks) if peaks else None
    mfu = parts.get("mfu", {})
    for key in ("vision_mfu", "compressor_mfu", "prefill_mfu"):
        figures[key] = mfu.get(key)
    figures["compressor_speedup"] = parts.get("compressor", {}).get("speedup_fastest")
    steps = parts.get("decoding", {})
    figures["operations_per_layer"] = steps.get("operations_per_layer")
    figures["kernels_per_layer"] = {name: steps.get(f"{key}step_profile", {}).get("kernels_per_layer")
                                    for name, key in (("eager", ""), ("fused", "fused_"))}
    decoding = parts.get("compiled", {})
    figures["per_token_ms_by_path"] = {name: path.get("ms_per_token") for name, path in
                                       decoding.get("paths", {}).items()}
    figures["per_token_floor_ms"] = decoding.get("floor", {}).get("floor_ms")
    figures["fastest_compiled"] = decoding.get("fastest_compiled")
    requests = decoding.get("requests", {})
    figures["hour_seconds_compiled"] = requests.get("hour", {}).get("total_s")
    figures["followup_seconds_compiled"] = requests.get("asked_again", {}).get("total_s")
    figures["package_build_s"] = {name: built.get("build_s") for name, built in decoding.get("packages", {}).items()}
    loader = parts.get("loader", {})
    figures["loader_chosen"] = loader.get("chosen")
    figures["loader_passed"] = loader.get("passed")
    figures["loader_cause"] = loader.get("diagnosis", {}).get("cause")
    figures["loader_remedy"] = loader.get("diagnosis", {}).get("remedy")
    figures["weights_read_gb_s"] = parts.get("cold_call", {}).get("weights_read", {}).get("gb_s")
    int8 = parts.get("int8", {})
    figures["int8_hour_seconds"] = int8.get("hour", {}).get("total_s")
    figures["int8_peak_memory_gb"] = int8.get("hour", {}).get("peak_memory_gb")
    figures["int8_logits_max_relative"] = int8.get("logits_max_relative")


def verdicts(figures: dict) -> list[str]:
    """What the run shows to be wrong: conformance failures, and fast or compiled paths whose outputs left their
    tolerance or whose tokens differ."""
    parts, failed = figures["parts"], []
    for dtype, result in parts.get("conformance", {}).items():
        if isinstance(result, dict) and result.get("failures"):
            failed.append(f"conformance in {dtype}: {len(result['failures'])} checks failed")
    decoding = parts.get("decoding", {})
    if decoding and not decoding.get("within_tolerance"):
        failed.append(f"graphed decoding's logits off by {decoding.get('logits_max_relative')} relative")
    if decoding.get("fused", {}).get("within_tolerance") is False:
        failed.append(f"the fused step's logits off by {decoding['fused'].get('logits_max_relative')} relative")
    if decoding.get("same_tokens") is False:
        failed.append("eager, graphed and fused decoding answered with different tokens")
    if parts.get("follow_ups", {}).get("same_answer_from_cache") is False:
        failed.append("the answer from the cached compression differs from the first answer")
    failed += compiled_verdicts(parts.get("compiled", {}))
    if parts.get("cold_call", {}).get("same_tokens") is False:
        failed.append("the cold call's answer differs from the warm first answer")
    stacked = parts.get("compressor", {}).get("stacked_vs_per_pair_relative")
    if stacked is not None and stacked > BF16_RTOL:
        failed.append(f"stacked vision attention off the per-pair path by {stacked:.2e} relative")
    if parts.get("pixels", {}).get("identical") is False:
        failed.append("pixels normalised on the device differ from the host's")
    int8 = parts.get("int8", {})
    if int8.get("within_tolerance") is False:
        failed.append(f"int8 weights put the decoder's logits {int8.get('logits_max_relative')} relative away")
    loader = parts.get("loader", {})
    if "passed" in loader and not loader["passed"]:
        failed.append("no way of loading the compiled layer step ran (loader part)")
    return failed


def compiled_verdicts(decoding: dict) -> list[str]:
    """Every decoding path that ran must agree with the eager forward; a package that could not be built is not a
    failure (it is listed under `packages`) unless none could be."""
    failed = []
    for name, path in decoding.get("paths", {}).items():
        if "error" in path:
            failed.append(f"decoding path {name} failed: {path['error'][:200]}")
        elif not path.get("within_tolerance"):
            failed.append(f"decoding path {name} off the eager forward: logits by {path['logits_max_relative']:.2e} "
                          f"relative, {'same' if path['same_tokens'] else 'other'} tokens")
    packages = decoding.get("packages", {})
    if packages and not any("path" in built for built in packages.values()):
        failed.append("no compiled decoding package could be built")
    if decoding.get("requests", {}).get("same_tokens") is False:
        failed.append("the answer with compiled decoding differs from the first answer")
    return failed
