"""Many (video, question) jobs from a JSON Lines file: one model load, resumable, one result line per job.

Each input line is an object with `id`, `video` (absolute, or relative to the input file) and `question`, and
optionally per-job settings (the settings table's batch keys: `tempo.settings.settings(BATCH)`). Any other field
(`family`, `expected`, ...) is copied to the job's result. A result line is the CLI's `--json` object plus `id`,
`video` and `question`, or `{"id", "error"}` when the job fails; the batch goes on. Results are appended as each job
ends, so an interrupted batch resumes where it stopped: a second run with the same output skips the ids already
answered and retries the ones that failed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .config import RunConfig
from .engine import VideoCache, run
from .errors import InputError, TempoError
from .model import CheckpointSpec, TempoModel
from .render.progress import RunProgress
from .render.report import Asked, write_report
from .render.terminal import ProgressLine
from .settings import BATCH, settings, with_settings

RESULT_KEYS = ("id", "video", "question")
BAR = 24  # characters of a batch's progress bar
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchJob:
    """One line of a jobs file: which video, which question, and the settings that differ from the batch's."""

    id: str
    video: str
    question: str
    settings: dict[str, object] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)  # copied to the result as they are


@dataclass(frozen=True)
class JobError:
    """A line of a jobs file that is no job, or a job that failed: its result line says why."""

    id: str
    error: str

    def line(self) -> dict:
        return {"id": self.id, "error": self.error}


Jobs = list["BatchJob | JobError"]  # a jobs file's lines, in order


@dataclass
class Summary:
    """What a batch run did with its jobs."""

    total: int = 0
    answered: int = 0
    skipped: int = 0
    failed: int = 0

    def __str__(self) -> str:
        return (f"{self.total} jobs: {self.answered} answered, {self.skipped} skipped (already answered), "
                f"{self.failed} failed")


def read_jobs(path: str | os.PathLike) -> Jobs:
    """The jobs of a JSON Lines file, in order; a line that is not a job becomes its `JobError`."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"No jobs file at {path}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"Cannot read the jobs file {path}: {exc}.") from None
    jobs: Jobs = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        job: BatchJob | JobError
        try:
            job = parse_job(line, path.parent)
        except InputError as exc:
            job = JobError(_line_id(line, number), str(exc))
        if job.id in first_line:  # results are matched to jobs by id: a repeated id makes them ambiguous
            raise InputError(f"{path.name}: the id {job.id!r} is on lines {first_line[job.id]} and {number}; "
                             "ids must be unique.")
        first_line[job.id] = number
        jobs.append(job)
    return jobs


def parse_job(line: str, directory: Path) -> BatchJob:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"Not a JSON object ({exc.msg}).") from None
    if not isinstance(entry, dict):
        raise InputError("Each line must be a JSON object with id, video and question.")
    missing = [key for key in ("id", "video", "question") if key not in entry]
    if missing:
        raise InputError(f"The job lacks {', '.join(missing)}.")
    if not isinstance(entry["id"], (str, int)) or not isinstance(entry["video"], str):
        raise InputError("id must be a string or a number and video a path.")
    keys = {setting.name for setting in settings(BATCH)}
    chosen = {key: value for key, value in entry.items() if key in keys}
    extra = {key: value for key, value in entry.items() if key not in RESULT_KEYS and key not in keys}
    video = entry["video"] if os.path.isabs(entry["video"]) else str(directory / entry["video"])
    return BatchJob(str(entry["id"]), video, entry["question"], chosen, extra)


def _line_id(line: str, number: int) -> str:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        entry = None
    if isinstance(entry, dict) and isinstance(entry.get("id"), (str, int)):
        return str(entry["id"])
    return f"line {number}"


def job_config(job: BatchJob, base: RunConfig, spec: CheckpointSpec) -> RunConfig:
    """`base` with the job's own settings, checked by the settings table for this checkpoint."""
    return with_settings(base, job.settings, spec)


def pending_jobs(jobs: Jobs, output: Path) -> Jobs:
    """The jobs `output` has not answered yet, in order: what a run (of either engine) still has to do."""
    done = answered_ids(output)
    return [job for job in jobs if job.id not in done]


def resume(jobs: Jobs, output: Path, reports: str | os.PathLike | None) -> tuple[Summary, Jobs]:
    """How a run of either engine starts: the jobs still to do, a summary that counts the ones already answered,
    and the reports folder made."""
    pending = pending_jobs(jobs, output)
    if reports:
        os.makedirs(reports, exist_ok=True)
    return Summary(total=len(jobs), skipped=len(jobs) - len(pending)), pending


def answered_ids(output: Path) -> set[str]:
    """The ids `output` already answered. Lines of failed jobs (retried now) and a half-written last line are
    dropped from the file."""
    if not output.is_file():
        return set()
    kept, ids = [], set()
    for line in output.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and "answer" in entry and "id" in entry:
            kept.append(line)
            ids.add(str(entry["id"]))
    partial = output.with_name(output.name + ".partial")
    partial.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    partial.replace(output)
    return ids


def job_done(progress: ProgressLine, job_id: str, outcome: str) -> None:
    """A batch's progress after a job: jobs done, a bar, time so far and to go, and how the job went."""
    done = progress.done + 1
    filled = math.floor(BAR * done / max(1, progress.total))
    progress.show(done, f"batch {done}/{progress.total} [{'#' * filled}{'.' * (BAR - filled)}] "
                        f"{progress.elapsed():5.0f}s elapsed, ETA {progress.eta(done):4.0f}s  {job_id}: {outcome}")


def report_name(job_id: str) -> str:
    """A file name for a job's report: the id with anything unsafe replaced."""
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", job_id).strip("._") or "job") + ".html"


def run_job(model: TempoModel, job: BatchJob, config: RunConfig, cache: VideoCache) -> RunProgress:
    """One job to its `Finished` event, folded into the progress its report is made from."""
    progress = RunProgress(job.question)
    for event in run(model, job.video, job.question, config, cache):
        progress.update(event)
    if progress.finished is None:
        raise TempoError("The pipeline ended without an answer.")
    return progress


def run_batch(model: TempoModel, jobs: Jobs, output: str | os.PathLike, base: RunConfig, err: TextIO,
              reports: str | os.PathLike | None = None) -> Summary:
    """Answer every job not already in `output`, appending one line each; returns what happened."""
    output = Path(output)
    summary, pending = resume(jobs, output, reports)
    cache = VideoCache()  # questions about the same video reuse its decoded frames and vision features
    progress = ProgressLine(err, len(pending))
    with output.open("a", encoding="utf-8") as results:
        for job in pending:
            if isinstance(job, JobError):  # a line that was not a job
                line, outcome = job.line(), "error: " + job.error
            else:
                line, outcome = answer_job(model, job, base, cache, reports)
            record(results, line, outcome, summary, progress)
    return summary


def record(results: TextIO, line: dict, outcome: str, summary: Summary, progress: ProgressLine) -> None:
    """One job's result line appended to the output at once (what a rerun resumes from), and counted."""
    summary.failed += "error" in line
    summary.answered += "error" not in line
    results.write(json.dumps(line, ensure_ascii=False) + "\n")
    results.flush()
    job_done(progress, str(line["id"]), outcome)


def answer_job(model: TempoModel, job: BatchJob, base: RunConfig, cache: VideoCache,
               reports: str | os.PathLike | None) -> tuple[dict, str]:
    """A job's result line and how it went; a failure becomes an `{"id", "error"}` line."""
    try:
        progress = run_job(model, job, job_config(job, base, model.spec), cache)
    except (TempoError, OSError) as exc:
        return JobError(job.id, str(exc)).line(), "error: " + str(exc)
    except Exception as exc:  # a bug on one job must not cost the others their answers
        log.exception("job %s failed", job.id)
        message = f"Unexpected {type(exc).__name__}: {exc}"
        return JobError(job.id, message).line(), "error: " + message
    finished = progress.finished
    assert finished is not None  # run_job runs to the end
    if reports:
        write_report(Asked(progress), Path(reports, report_name(job.id)), model=model.spec.name)
    line = {"id": job.id, "video": job.video, "question": job.question, **job.extra, **finished.to_dict()}
    return line, f"answered in {finished.timings.get('total', 0):.1f}s"
