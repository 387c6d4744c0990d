"""The checks, part by part, against one case's recorded values: the ATA vectors, sampling and pixels, the
compressor, the allocation, the decoder, and the same question through the public pipeline."""

from __future__ import annotations

import hashlib
import json
import lzma
import math
import os

import numpy as np
import torch
from safetensors.torch import load

from ..allocation import Strategy, adaptive_token_allocation, allocate
from ..config import AllocationConfig, GenerationConfig, RunConfig, Zoom
from ..engine import run
from ..engine.steps import compress_batch, encode_batch, micro_batches
from ..errors import InputError, TempoError
from ..events import AllocationDone, AnswerToken, Finished, SegmentCompressed
from ..model import TempoModel
from ..model.prompts import decoder_prompt_ids, segment_prompt_ids, time_tag
from ..timing import Timer
from ..video import SamplingPlan, open_video, uniform_plan
from ..video.patches import normalize
from ..video.segments import PreparedSegment, prepare_segments
from .fixtures import Case
from .report import BLOCK_SUM_RTOL, RELEVANCE_ATOL, TENSOR_ATOL, Report

# A question holding the chat template's markup is plain text here, where the released code reads it as markup:
# a deliberate difference, so such a case's prompt-dependent values are not compared.
MARKUP = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|video_pad|>",
          "<|image_pad|>", "<image>")
IMAGE_TOKEN_INDEX = -200


def check_ata_vectors(path: str, report: Report) -> None:
    """Every vector with budget >= segments must match exactly; below that we deliberately refuse."""
    with open(path) as f:
        vectors = json.load(f)["vectors"]
    matched, deliberate = 0, 0
    for vector in vectors:
        scores = [float(np.float32(s)) for s in vector["scores"]]
        name, budget = vector["name"], vector["max_budget"]
        if budget < len(scores):
            try:
                adaptive_token_allocation(scores, budget, vector["min_tokens"], vector["n_tokens_per_segment"])
            except InputError:
                deliberate += 1
                report.check("ata:" + name, "allocations", True,
                             f"deliberate difference: budget {budget} < {len(scores)} segments is refused "
                             f"(released keeps >=1 token each and exceeds the budget)")
                continue
            report.check("ata:" + name, "allocations", False, "budget below segment count was not refused")
            continue
        got = adaptive_token_allocation(scores, budget, vector["min_tokens"], vector["n_tokens_per_segment"])
        matched += report.exact("ata:" + name, "allocations", got, vector["allocations"])
    print(f"ATA vectors: {matched} exact, {deliberate} deliberate differences, of {len(vectors)}", flush=True)


def _pixel_checks(case: dict, tensors: dict, rows: torch.Tensor, model: TempoModel, directory: str, name: str,
                  report: Report) -> None:
    values = normalize(rows, model.geometry).contiguous()
    digest = hashlib.sha256(values.numpy().tobytes()).hexdigest()
    sums = values.double().reshape(-1, 4, values.shape[1]).sum(dim=(1, 2)).float()
    expected_sums = tensors["pixel_block_sums"]
    if sums.shape == expected_sums.shape:
        rel = ((sums - expected_sums).abs() / expected_sums.abs().clamp(min=1.0)).max().item()
    else:
        rel = math.inf
    if digest == case["pixel_values_videos_sha256_f32"]:
        report.check(name, "pixels", True, f"sha256 identical ({values.shape[0]} patch rows)")
    else:
        report.check(name, "pixels", False, f"sha256 differs; block sums max rel diff {rel:.1e} "
                                            f"(rtol {BLOCK_SUM_RTOL:.0e})")
    if case.get("pixel_values_videos_u8_file"):
        file = os.path.join(directory, "pixels", os.path.basename(case["pixel_values_videos_u8_file"]))
        with open(file, "rb") as f:
            expected_u8 = load(lzma.decompress(f.read()))["pixel_values_videos_u8"]
        equal = expected_u8.shape == rows.shape and torch.equal(expected_u8, rows)
        detail = "identical" if equal else (
            f"{int((expected_u8 != rows).sum()) if expected_u8.shape == rows.shape else 'shape'} differ")
        report.check(name, "pixels_uint8", equal, detail)


def check_case(directory: str, name: str, model: TempoModel, report: Report) -> None:
    """Every recorded quantity of one case: sampling and pixels, the compressor, the allocation, the decoder, and
    the same question through the public pipeline."""
    case = Case.read(directory, name)
    if any(token in case.query for token in MARKUP) or not case.query.strip():
        report.check(name, "query", True, "deliberate difference: markup in a question is plain text here / "
                                          "an empty question is refused; prompt-dependent values not compared")
        return
    plan, segments = check_sampling(case, model, directory, report)
    memories, relevance = check_compressor(case, model, plan, segments, report)
    budget = case.recorded["visual_token_budget"]
    if case.strategy == Strategy.ATA and budget < len(segments):
        report.check(name, "allocations", True, "deliberate difference: budget below the segment count is refused")
        return
    expected = case.expected_tokens(model.spec.num_memory_tokens, len(segments))
    tokens = allocate(relevance, budget, case.recorded["k_min"], model.spec.num_memory_tokens, case.strategy)
    report.exact(name, "allocations", tokens, expected)
    # In bf16 the decoder is checked on the recorded allocation, whatever rounding made of ours.
    check_decoder(case, model, plan, memories, expected if report.reduced else tokens, report)
    if not pyav_imports():  # the pipeline reads the file's headers with PyAV first
        report.check(name, "run", True, "skipped: PyAV is not installed here (the pipeline probes headers with it)")
        return
    check_pipeline(case, model, expected, report)


def pyav_imports() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def check_sampling(case: Case, model: TempoModel, directory: str,
                   report: Report) -> tuple[SamplingPlan, list[PreparedSegment]]:
    """The video's frame count and rate, the sampled frames, the segments and their pixels."""
    name, recorded = case.name, case.recorded
    reader = open_video(case.video)
    info = reader.info
    report.exact(name, "video_total_frames", info.total_frames, recorded["video_total_frames"])
    report.check(name, "video_avg_fps", abs(info.native_fps - recorded["video_avg_fps"]) < 1e-9,
                 f"{info.native_fps} vs {recorded['video_avg_fps']}")
    plan = uniform_plan(info, case.sampling)
    report.exact(name, "frame_indices", plan.frame_indices, recorded["sampled_frame_indices"])
    report.check(name, "real_fps", abs(plan.real_fps - recorded["real_fps"]) < 1e-9,
                 f"{plan.real_fps!r} vs {recorded['real_fps']!r}")
    report.exact(name, "segment_num_frames", [len(w) for w in plan.segments], recorded["segment_num_frames"])
    segments = list(prepare_segments(case.video, reader, plan, case.sampling, model.geometry, Timer()))
    report.exact(name, "video_grid_thw", [list(s.grid) for s in segments], recorded["video_grid_thw"])
    rows = [s.pixel_rows for s in segments if s.pixel_rows is not None]  # all of them: none is encoded yet
    _pixel_checks(recorded, case.tensors, torch.cat(rows), model, directory, name, report)
    return plan, segments


def check_compressor(case: Case, model: TempoModel, plan: SamplingPlan, segments: list[PreparedSegment],
                     report: Report) -> tuple[list[torch.Tensor], list[float]]:
    """The compressor's prompts, then its memories and relevance, in micro-batches of 4 as the pipeline runs it."""
    name, tensors, timer = case.name, case.tensors, Timer()
    pad_id = model.compressor_tokenizer.token_id("<|endoftext|>")
    prompts = [segment_prompt_ids(model.compressor_tokenizer, case.query, plan, s.index, s.grid, model.geometry)
               for s in segments]
    width = max(len(p) for p in prompts)
    report.exact(name, "svlm_input_ids", [p + [pad_id] * (width - len(p)) for p in prompts], tensors["svlm_input_ids"])
    report.exact(name, "svlm_attention_mask", [[1] * len(p) + [0] * (width - len(p)) for p in prompts],
                 tensors["svlm_attention_mask"])
    memories, relevance = [], []
    for batch in micro_batches(segments, 4):
        batch = encode_batch(model, batch, timer)
        batch_memories, batch_relevance = compress_batch(model, batch, case.query, plan, timer)
        memories += list(batch_memories)
        relevance += batch_relevance
    report.close(name, "compressed_features", torch.stack(memories), tensors["compressed_features"], TENSOR_ATOL)
    if case.strategy == Strategy.ATA:
        report.close(name, "relevance", torch.tensor(relevance), tensors["relevance_scores"], RELEVANCE_ATOL)
    return memories, relevance


def check_decoder(case: Case, model: TempoModel, plan: SamplingPlan, memories: list[torch.Tensor],
                  tokens: list[int], report: Report) -> None:
    """The time tags and the decoder's prompt, its input embeddings, first logits and greedy answer."""
    name, tensors, query = case.name, case.tensors, case.query
    tags = [model.tokenizer.markup(time_tag(t)) for t in plan.tag_times()]
    report.exact(name, "timestamp_ids", [t for tag in tags for t in tag], tensors["timestamp_ids_flat"])
    report.exact(name, "timestamp_lengths", [len(tag) for tag in tags], tensors["timestamp_lengths"])
    before, after = decoder_prompt_ids(model.tokenizer, query)
    report.exact(name, "decoder_input_ids", before + [IMAGE_TOKEN_INDEX] + after, tensors["decoder_input_ids"][0])
    with torch.inference_mode():
        embeds, _ = model.decoder_inputs(memories, tokens, "head", query, plan.tag_times(),
                                         case.recorded["tokenizer_model_max_length"])
        logits, _ = model.decoder.prefill(embeds)
    report.close(name, "decoder_inputs_embeds", embeds, tensors["decoder_inputs_embeds"][0], TENSOR_ATOL)
    report.close(name, "first_step_logits", logits, tensors["first_step_logits"], TENSOR_ATOL)
    greedy = GenerationConfig(max_new_tokens=case.recorded["max_new_tokens"], temperature=0.0)
    generated = list(model.decoder.generate(embeds, greedy, set(model.spec.stop_ids)))
    report.exact(name, "generated_ids", generated, case.recorded["generated_token_ids"])


def check_pipeline(case: Case, model: TempoModel, expected_tokens: list[int], report: Report) -> None:
    """The same question through `tempo.run`, as a user asks it."""
    name, recorded = case.name, case.recorded
    greedy = GenerationConfig(max_new_tokens=recorded["max_new_tokens"], temperature=0.0)
    allocation = AllocationConfig(budget=recorded["visual_token_budget"], k_min=recorded["k_min"],
                                  strategy=case.strategy)
    config = RunConfig(sampling=case.sampling, allocation=allocation, generation=greedy,
                       context_length=recorded["tokenizer_model_max_length"], zoom=Zoom.OFF.value)  # as released
    events = list(run(model, case.video, case.query, config))
    finished = events[-1]
    if not isinstance(finished, Finished):
        raise TempoError("the pipeline ended without an answer")
    run_relevance = [e.segment.relevance for e in events if isinstance(e, SegmentCompressed)]
    run_tokens = next(e.tokens for e in events if isinstance(e, AllocationDone))
    report.exact(name, "run:allocations", run_tokens, expected_tokens)
    report.exact(name, "run:generated_ids", [e.token_id for e in events if isinstance(e, AnswerToken)],
                 recorded["generated_token_ids"])
    report.exact(name, "run:answer", finished.answer, recorded["generated_text"])
    if case.strategy == Strategy.ATA:
        report.close(name, "run:relevance", torch.tensor(run_relevance), case.tensors["relevance_scores"],
                     RELEVANCE_ATOL)
