"""`tempo batch --engine ray`: a batch's jobs on a Ray cluster, one model per actor.

The jobs file, the result lines and the resume are the local engine's (`tempo.batch`): jobs already answered in
the output are skipped, and each line is appended as soon as its job ends, in the order jobs finish. Ray Data
streams the jobs through a pool of actors (`ActorPoolStrategy`), each holding one model, on a GPU each where the
cluster has GPUs and on a CPU otherwise. A job that fails is an error line; a run that stops keeps what it wrote.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TextIO

from ..batch import BatchJob, JobError, Jobs, Summary, answer_job, record, resume
from ..config import RunConfig
from ..engine import VideoCache
from ..errors import InputError, TempoError
from ..model import from_pretrained
from ..render.terminal import ProgressLine
from . import require

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cluster:
    """Where the jobs run and how many models answer them."""

    address: str | None = None  # None: a Ray instance on this machine, started for the run and stopped after it
    actors: int | None = None  # None: one per GPU of the cluster, or one where it has none


@dataclass(frozen=True)
class Loading:
    """How each actor loads its model (the command line's --model, --base, --device, --dtype and --int8)."""

    model: str | None = None
    base: str | None = None
    device: str | None = None
    dtype: str | None = None
    int8: bool = False


class Answerer:
    """A Ray Data actor: one model, answering each job it is handed as `tempo batch` would."""

    def __init__(self, loading: Loading, base: RunConfig, reports: str | None) -> None:
        self.model = from_pretrained(loading.model, base=loading.base, device=loading.device, dtype=loading.dtype,
                                     int8=loading.int8)
        self.base, self.reports = base, reports
        self.cache = VideoCache()  # the jobs this actor gets about one video reuse its frames and features

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, list[str]]:  # Ray Data's numpy batch
        answered = [answer_job(self.model, BatchJob(**json.loads(text)), self.base, self.cache, self.reports)
                    for text in batch["job"]]
        return {"line": [json.dumps(line, ensure_ascii=False) for line, _ in answered],
                "outcome": [outcome for _, outcome in answered]}


def run_batch(jobs: Jobs, output: str | os.PathLike, base: RunConfig, err: TextIO, loading: Loading,
              cluster: Cluster, reports: str | os.PathLike | None = None) -> Summary:
    """Answer every job not already in `output` on Ray, appending one line each as it ends; returns what happened.
    `base` holds the batch's settings; each actor checks them against its checkpoint with each job's own."""
    ray = require("ray", "ray")
    require("ray.data", "ray")
    output = Path(output)
    summary, pending = resume(jobs, output, reports)
    todo = [job for job in pending if isinstance(job, BatchJob)]
    if todo:
        connect(ray, cluster.address)
    try:
        progress = ProgressLine(err, len(pending))  # started once Ray is up, so its ETA counts jobs, not start-up
        with output.open("a", encoding="utf-8") as results:
            for error in (job for job in pending if isinstance(job, JobError)):  # lines that were not jobs: no model
                record(results, error.line(), "error: " + error.error, summary, progress)
            for line, outcome in stream(ray, todo, base, loading, cluster, reports) if todo else ():
                record(results, line, outcome, summary, progress)
    except ray.exceptions.RayError as exc:
        raise TempoError(f"The Ray run stopped ({type(exc).__name__}: {reason(exc)}). The "
                         f"{summary.answered + summary.failed} results so far are in {output}; run the same "
                         "command again to finish the rest.") from None
    finally:
        if todo:
            ray.shutdown()
    return summary


def reason(exc: Exception) -> str:
    """The last line of a Ray error: the error raised where it failed (an actor's model that would not load, ...)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(exc).splitlines()]  # without colours
    return next((line for line in reversed(lines) if line), type(exc).__name__)


def connect(ray: ModuleType, address: str | None) -> None:
    """Join the cluster at `address`, or start Ray here without a dashboard or usage reports (it runs offline)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:  # the workers of a Ray started here inherit this environment: they import the tempo this process runs
        root = str(Path(__file__).resolve().parents[2])
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))
        ray.init(include_dashboard=False, logging_level=logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the batch's own progress line says how far it is


def stream(ray: ModuleType, jobs: list[BatchJob], base: RunConfig, loading: Loading, cluster: Cluster,
           reports: str | os.PathLike | None) -> Iterator[tuple[dict, str]]:
    """Each job's result line and outcome, as the actors finish them."""
    actors, resources = actor_pool(ray.cluster_resources(), cluster.actors)
    log.info("answering %d jobs with %d actors (%s each)", len(jobs), actors, resources)
    dataset = ray.data.from_items([{"job": json.dumps(asdict(job), ensure_ascii=False)} for job in jobs])
    answers = dataset.map_batches(Answerer, batch_size=1, compute=ray.data.ActorPoolStrategy(size=actors),
                                  fn_constructor_kwargs={"loading": loading, "base": base,
                                                         "reports": os.fspath(reports) if reports else None},
                                  **resources)
    for row in answers.iter_rows():
        yield json.loads(row["line"]), str(row["outcome"])


def actor_pool(available: Mapping[str, float], actors: int | None) -> tuple[int, dict[str, float]]:
    """How many actors and what each reserves: a GPU each where the cluster has GPUs, else a CPU each; refused
    when the cluster cannot hold that many at once (Ray would wait for them forever)."""
    kind = "GPU" if available.get("GPU", 0) >= 1 else "CPU"
    capacity = int(available.get(kind, 0))
    actors = actors or (capacity if kind == "GPU" else 1)
    if actors > capacity:
        raise InputError(f"The Ray cluster has {capacity} {kind}s, so it cannot hold {actors} actors of one {kind} "
                         f"each; use --actors {capacity} or fewer.")
    return actors, {"num_gpus": 1} if kind == "GPU" else {"num_cpus": 1}
