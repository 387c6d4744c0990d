"""Tempo as an lmms-eval model: `lmms-eval --model tempo --model_args pretrained=DIR,budget=4096 --tasks videomme`.

lmms-eval finds it through the `lmms_eval.models` entry point (`tempo.integrations.lmms_manifest`). Each request is
one video and one question, answered by `tempo.answer`; questions about the same video reuse its frames and vision
features. Model args and the task's generation kwargs are checked by the settings table, as every other way in.
Each log sample's token counts hold the visual tokens the decoder read and the answer's length; with
`allocation_log=FILE` every request's allocation (tokens and relevance per segment) is also one JSON line appended
there, in the shape of `tempo batch`'s results (so `tempo figures` draws it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tqdm import tqdm

from ..config import RunConfig, Zoom
from ..engine import VideoCache, answer
from ..errors import InputError, TempoError
from ..events import Finished
from ..model import TempoModel, from_pretrained
from ..model.modeling import DTYPES
from ..settings import CLI, limits_from_env, settings, with_settings
from . import missing_extra

try:
    from lmms_eval.api.instance import GenerationResult, Instance, TokenCounts
    from lmms_eval.api.model import lmms
except ImportError as exc:
    raise missing_extra("lmms", exc) from exc

if TYPE_CHECKING:
    from accelerate import Accelerator

LOAD_ARGS = ("pretrained", "base", "device", "dtype", "allocation_log")
# Generation kwargs lmms-eval tasks set that mean something here; any other is named once in the log and ignored.
GENERATION_KWARGS = {"max_new_tokens", "temperature", "do_sample", "top_p", "num_beams", "until"}
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelArgs:
    """What `--model_args` chose: the checkpoint and how to load it, and run settings (checked by the table now, and
    against the checkpoint once it is loaded)."""

    pretrained: str | None = None  # None: tempo.from_pretrained's default (the embedded Tempo-Tiny off a Space)
    base: str | None = None
    device: str | None = None
    dtype: str | None = None
    allocation_log: str | None = None
    settings: Mapping[str, object] = field(default_factory=dict)


def parse_model_args(args: Mapping[str, object]) -> ModelArgs:
    """`args` as lmms-eval parsed them, split into load options and settings; an unknown name is refused."""
    names = {setting.name for setting in settings(CLI)}
    unknown = sorted(set(args) - set(LOAD_ARGS) - names)
    if unknown:
        raise InputError(f"The tempo model has no argument {', '.join(unknown)}; it takes {', '.join(LOAD_ARGS)} "
                         f"and the settings {', '.join(sorted(names))}.")
    load = {key: _text(key, args[key]) for key in LOAD_ARGS if args.get(key) is not None}
    if load.get("dtype", "float32") not in DTYPES:
        raise InputError(f"dtype must be one of {', '.join(DTYPES)} (got {load['dtype']!r}).")
    chosen = {key: value for key, value in args.items() if key in names}
    with_settings(RunConfig(), chosen)  # refused before the (slow) load; the checkpoint's own ranges come after it
    return ModelArgs(**load, settings=chosen)


def _text(key: str, value: object) -> str:
    # lmms-eval turns "true" into True and digits into numbers; a path or a hub id is never a bool
    if isinstance(value, bool):
        raise InputError(f"{key} must be a path, a hub id or a name (got {value}).")
    return str(value)


def check_batch_size(batch_size: object) -> None:
    """Tempo answers one (video, question) at a time; lmms-eval's "auto" picks that too."""
    if str(batch_size).split(":")[0] in ("1", "auto"):
        return
    raise InputError(f"The tempo model answers one request at a time (batch_size 1, got {batch_size}); use "
                     "micro_batch=N for segments per compressor pass, or `accelerate launch` for more processes.")


def placement(device: str | None) -> tuple[str | None, Accelerator | None]:
    """The device to load on, and the Accelerator when `accelerate launch` started several processes (each then
    takes its own GPU, or the CPU under `--cpu`)."""
    from accelerate import Accelerator

    accelerator = Accelerator()
    if accelerator.num_processes == 1:
        return device, None
    if device is not None and device != str(accelerator.device):
        log.warning("device=%s is ignored under accelerate launch: process %d uses %s", device,
                    accelerator.process_index, accelerator.device)
    return str(accelerator.device), accelerator


def request_config(base: RunConfig, kwargs: Mapping[str, object], model: TempoModel) -> RunConfig:
    """`base` under a task's generation kwargs (which override the model args), checked by the settings table."""
    if kwargs.get("num_beams", 1) not in (1, None):
        raise InputError(f"The tempo model decodes greedily or by sampling; num_beams={kwargs['num_beams']} "
                         "(beam search) is not supported.")
    chosen = {name: kwargs[name] for name in ("max_new_tokens", "temperature", "top_p")
              if kwargs.get(name) is not None}
    if kwargs.get("do_sample") is False:
        chosen["temperature"] = 0.0  # greedy, whatever temperature the task also names
    return with_settings(base, chosen, model.spec)


def stop_strings(kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """The task's `until`: one string or a list."""
    until = kwargs.get("until") or ()
    return (until,) if isinstance(until, str) else tuple(until)


def cut(text: str, until: Sequence[str]) -> str:
    """`text` up to the first stop string (the decoder itself stops at its end token or max_new_tokens)."""
    ends = [text.find(stop) for stop in until if stop and stop in text]
    return text[:min(ends)] if ends else text


def video_path(visuals: object) -> str:
    """The one video file a request is about."""
    if isinstance(visuals, (list, tuple)) and len(visuals) == 1:
        visuals = visuals[0]
    if not isinstance(visuals, str):
        kind = f"{len(visuals)} visuals" if isinstance(visuals, (list, tuple)) else type(visuals).__name__
        raise InputError(f"The tempo model answers about one video file per question; this task gives {kind}.")
    return visuals


class Tempo(lmms):
    """lmms-eval's `--model tempo`: one Tempo checkpoint answering each request about its video."""

    def __init__(self, batch_size: int | str = 1, max_batch_size: int | None = None, **model_args: object) -> None:
        super().__init__()  # max_batch_size: lmms-eval offers it to every model; it only sizes batches it grows
        args = parse_model_args(model_args)
        check_batch_size(batch_size)
        device, self.accelerator = placement(args.device)
        self.model = from_pretrained(args.pretrained, base=args.base, device=device, dtype=args.dtype)
        # The paper's numbers come from one pass over the whole video: zoom only where a run asks for it.
        self.config = with_settings(RunConfig(limits=limits_from_env(), zoom=Zoom.OFF.value), args.settings,
                                    self.model.spec)
        self.cache = VideoCache()
        self.allocation_log = Path(args.allocation_log) if args.allocation_log else None
        if self.accelerator is not None:
            self._rank, self._world_size = self.accelerator.process_index, self.accelerator.num_processes
        self.ignored: set[str] = set()

    @property
    def device(self) -> torch.device:
        """Where the model runs (lmms-eval gathers each rank's request counts there)."""
        return self.model.device

    def generate_until(self, requests: list[Instance]) -> list[GenerationResult]:
        """One answer per request; requests about the same video run one after another, so its frames are reused."""
        videos = [self.video_of(request) for request in requests]
        results: list[GenerationResult | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: videos[i])
        for index in tqdm(order, desc="tempo", disable=self.rank != 0):
            context, kwargs, _, doc_id, task, _ = requests[index].args
            results[index] = (GenerationResult("") if padding(requests[index])
                              else self.respond(videos[index], context, kwargs, f"{task}/{doc_id}"))
        return results

    def generate_until_multi_round(self, requests: list[Instance]) -> list[list[str]]:
        """Each request's answers, round by round, until the task's doc_to_text says it is done."""
        return [[] if padding(request) else self.rounds(*request.args) for request in requests]

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        """Not available: Tempo generates an answer; it does not score given continuations."""
        raise NotImplementedError(
            "The tempo model generates answers and cannot score continuations, so tasks with output_type "
            "loglikelihood or multiple_choice do not run on it; use generate_until tasks (videomme, lvbench, "
            "mlvu_dev and longvideobench_val_v are).")

    def video_of(self, request: Instance) -> str:
        """The video file a generate_until request is about, from the task's doc_to_visual."""
        _, _, doc_to_visual, doc_id, task, split = request.args
        return video_path(doc_to_visual(self.task_dict[task][split][doc_id]))

    def rounds(self, context: str, kwargs: dict, doc_to_visual: Callable, doc_to_text: Callable, doc_id: int,
               task: str, split: str) -> list[str]:
        """One multi-round request: answer, then ask doc_to_text for the next round's video and question."""
        doc = self.task_dict[task][split][doc_id]
        answers: list[str]
        visuals, answers, info, round_index = doc_to_visual(doc), [], None, 0
        while True:
            if round_index:
                visuals, context, done, answers, info = doc_to_text(doc, previous_output=answers,
                                                                    round_idx=round_index, previous_round_info=info)
                answers = list(answers)
                if done:
                    return answers
            answers.append(self.respond(video_path(visuals), context, kwargs, f"{task}/{doc_id}/{round_index}").text)
            round_index += 1

    def respond(self, video: str, question: str, kwargs: Mapping[str, object], request_id: str) -> GenerationResult:
        """One answer, with the visual tokens it read; a request Tempo cannot answer is logged and answers ''."""
        self.note_ignored(kwargs)
        config = request_config(self.config, kwargs, self.model)  # a task's mistake stops the run: every request has it
        try:
            finished = answer(self.model, video, question, config, self.cache)
        except TempoError as exc:
            log.error("%s (%s) got no answer: %s", request_id, video, exc)
            self.record({"id": request_id, "video": video, "question": question, "error": str(exc)})
            return GenerationResult("", TokenCounts(input_tokens=0, output_tokens=0))
        text = cut(finished.answer, stop_strings(kwargs))
        self.record(allocation_line(request_id, video, question, finished, text))
        return GenerationResult(text, TokenCounts(input_tokens=finished.tokens_used,
                                                  output_tokens=len(finished.token_ids)))

    def note_ignored(self, kwargs: Mapping[str, object]) -> None:
        """Name once each generation kwarg that means nothing to Tempo."""
        new = set(kwargs) - GENERATION_KWARGS - self.ignored
        if new:
            log.warning("the tempo model ignores the generation kwargs %s", ", ".join(sorted(new)))
            self.ignored |= new

    def record(self, line: dict) -> None:
        """One request's line in the allocation log, when there is one (one write, so ranks can share the file)."""
        if self.allocation_log is not None:
            with self.allocation_log.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line, ensure_ascii=False) + "\n")


def padding(request: Instance) -> bool:
    """A copy lmms-eval adds so that every rank has as many requests; its answer is dropped, so none is made."""
    return bool(request.metadata.get("__padding_only__"))


def allocation_line(request_id: str, video: str, question: str, finished: Finished, text: str) -> dict:
    """A request's allocation, as a `tempo batch` result line: per-segment tokens and relevance, budget, timings."""
    return {"id": request_id, "video": video, "question": question, **finished.to_dict(), "answer": text}
