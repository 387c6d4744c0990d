"""Many (video, question) jobs from a JSON Lines file: one model load, resumable, one result line per job.

Each input line is an object with `id`, `video` (absolute, or relative to the input file) and `question`, and
optionally per-job settings (the settings table's batch keys: `config.settings(BATCH)`). Any other field (`family`, `expected`, ...) is copied to the job's
result. A result line is the CLI's `--json` object plus `id`, `video` and `question`, or `{"id", "error"}` when
the job fails; the batch goes on. Results are appended as each job ends, so an interrupted batch resumes where it
stopped: a second run with the same output skips the ids already answered and retries the ones that failed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .cache import VideoCache
from .config import BATCH, RunConfig, settings
from .errors import InputError, TempoError

from .model import CheckpointSpec, TempoModel
from .pipeline import run
from .render.progress import RunProgress
from .render.report import Asked, write_report

RESULT_KEYS = ("id", "video", "question")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One line of a jobs file: which video, which question, and the settings that differ from the batch's."""

    id: str
    video: str
    question: str
    settings: dict[str, object] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)  # copied to the result as they are


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


def read_jobs(path: str | os.PathLike) -> list[Job | dict]:
    """The jobs of a JSON Lines file, in order; a line that is not a job becomes its `{"id", "error"}` result."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"No jobs file at {path}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"Cannot read the jobs file {path}: {exc}.") from None
    jobs: list[Job | dict] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            job = parse_job(line, path.parent)
        except InputError as exc:
            job = {"id": _line_id(line, number), "error": str(exc)}
        job_id = job.id if isinstance(job, Job) else job["id"]
        if job_id in first_line:  # results are matched to jobs by id: a repeated id makes them ambiguous
            raise InputError(f"{path.name}: the id {job_id!r} is on lines {first_line[job_id]} and {number}; "
                             "ids must be unique.")
        first_line[job_id] = number
        jobs.append(job)
    return jobs


def parse_job(line: str, directory: Path) -> Job:
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
    return Job(str(entry["id"]), video, entry["question"], chosen, extra)


def _line_id(line: str, number: int) -> str:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        entry = None
    if isinstance(entry, dict) and isinstance(entry.get("id"), (str, int)):
        return str(entry["id"])
    return f"line {number}"


def job_config(job: Job, base: RunConfig, spec: CheckpointSpec) -> RunConfig:
    """`base` with the job's own settings, checked by the settings table for this checkpoint."""
    return base.with_settings(job.settings, spec)


def job_id(job: Job | dict) -> str:
    """A job's id, or the id of a line that was not a job."""
    return job.id if isinstance(job, Job) else job["id"]


def pending_jobs(jobs: list[Job | dict], output: Path) -> list[Job | dict]:
    """The jobs `output` has not answered yet, in order: what a run (of either engine) still has to do."""
    done = answered_ids(output)
    return [job for job in jobs if job_id(job) not in done]


def resume(jobs: list[Job | dict], output: Path,
           reports: str | os.PathLike | None) -> tuple[Summary, list[Job | dict]]:
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


class ProgressBar:
    """Jobs done so far and an ETA on stderr: one rewritten line on a terminal, a line per job otherwise."""

    width = 24

    def __init__(self, stream: TextIO, total: int):
        self.stream, self.total, self.done = stream, total, 0
        self.started = time.perf_counter()
        self.tty = stream.isatty()

    def update(self, job_id: str, outcome: str) -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.done * (self.total - self.done)
        filled = math.floor(self.width * self.done / max(1, self.total))
        line = (f"batch {self.done}/{self.total} [{'#' * filled}{'.' * (self.width - filled)}] "
                f"{elapsed:5.0f}s elapsed, ETA {eta:4.0f}s  {job_id}: {outcome}")
        if self.tty:
            self.stream.write("\r" + line[:160].ljust(160) + ("\n" if self.done == self.total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def report_name(job_id: str) -> str:
    """A file name for a job's report: the id with anything unsafe replaced."""
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", job_id).strip("._") or "job") + ".html"


def run_job(model: TempoModel, job: Job, config: RunConfig, cache: VideoCache) -> RunProgress:
    """One job to its `Finished` event, folded into the progress its report is made from."""
    progress = RunProgress()
    for event in run(model, job.video, job.question, config, cache):
        progress.update(event)
    if progress.finished is None:
        raise TempoError("The pipeline ended without an answer.")
    return progress


def run_batch(model: TempoModel, jobs: list[Job | dict], output: str | os.PathLike, base: RunConfig, err: TextIO,
              reports: str | os.PathLike | None = None) -> Summary:
    """Answer every job not already in `output`, appending one line each; returns what happened."""
    output = Path(output)
    summary, pending = resume(jobs, output, reports)
    cache = VideoCache()  # questions about the same video reuse its decoded frames and vision features
    progress = ProgressBar(err, len(pending))
    with output.open("a", encoding="utf-8") as results:
        for job in pending:
            if isinstance(job, dict):  # a line that was not a job
                line, outcome = job, "error: " + job["error"]
            else:
                line, outcome = answer_job(model, job, base, cache, reports)
            record(results, line, outcome, summary, progress)
    return summary


def record(results: TextIO, line: dict, outcome: str, summary: Summary, progress: ProgressBar) -> None:
    """One job's result line appended to the output at once (what a rerun resumes from), and counted."""
    summary.failed += "error" in line
    summary.answered += "error" not in line
    results.write(json.dumps(line, ensure_ascii=False) + "\n")
    results.flush()
    progress.update(str(line["id"]), outcome)


def answer_job(model: TempoModel, job: Job, base: RunConfig, cache: VideoCache,
               reports: str | os.PathLike | None) -> tuple[dict, str]:
    """A job's result line and how it went; a failure becomes an `{"id", "error"}` line."""
    try:
        progress = run_job(model, job, job_config(job, base, model.spec), cache)
    except (TempoError, OSError) as exc:
        return {"id": job.id, "error": str(exc)}, "error: " + str(exc)
    except Exception as exc:  # a bug on one job must not cost the others their answers
        log.exception("job %s failed", job.id)
        message = f"Unexpected {type(exc).__name__}: {exc}"
        return {"id": job.id, "error": message}, "error: " + message
    result = progress.finished
    if reports:
        write_report(Asked(job.question, progress), Path(reports, report_name(job.id)), model=model.spec.name)
    line = {"id": job.id, "video": job.video, "question": job.question, **job.extra, **result.to_dict()}
    return line, f"answered in {result.timings.get('total', 0):.1f}s"
