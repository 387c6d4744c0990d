"""Mutation testing (mutmut) of the modules whose numbers users trust: each is mutated in a scratch copy of the
working tree against its own fast test files, and the scores go to a report (killed over killed plus survived;
the mutants listed in `EQUIVALENT` are shown with why, and not counted).

    python -m benchmarks.mutation [--module allocation ...] [--report benchmarks/results/mutation.md] [--jobs 1]
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "benchmarks" / "results" / "mutation.md"
GOAL = 0.90  # the score each module must hold (CONTRIBUTING.md)
# A mutant gets (the clean run of its tests + this constant) x this multiplier x 2 seconds of CPU time (mutmut's
# formula) before it counts as a timeout (an endless loop is a kill). CPU time, so a busy machine does not make one;
# mutmut's own defaults (1 s, 15x) spend minutes on each loop a mutant makes.
TIMEOUT_MULTIPLIER = 2.0
TIMEOUT_CONSTANT = 1.0


@dataclass(frozen=True)
class Target:
    """One module under mutation: its file, the fast test files that cover it, which of its functions count
    (mutmut's names, `fnmatch` patterns; all of them when empty), tests left out (pytest's node ids), and pytest's
    options for it."""

    source: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    note: str = ""
    deselect: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


TARGETS = {
    "allocation": Target("tempo/allocation.py", ("tests/test_allocation.py",)),
    "int8": Target("tempo/model/int8.py", ("tests/test_int8.py",)),
    "architecture": Target("tests/test_architecture.py", ("tests/test_architecture.py",),
                           tuple(f"tests.test_architecture.x_{rule}__*" for rule in (
                               "sources", "covers", "layer", "imports", "imported_by_name", "path_edits",
                               "upward_imports", "outside_the_library", "engine_inner_imports", "demo_trespassing")),
                           "the rules (the test functions themselves are not mutated)",
                           # imported as `tests.test_architecture`, the name mutmut gives the file's functions
                           options=("--import-mode=importlib",)),
    "moments": Target("tempo/moments.py", ("tests/test_moments.py",), (),
                      "without the run with Tempo-Tiny (a minute and more a mutant on a busy machine)",
                      ("tests/test_moments.py::test_a_run_with_tempo_tiny_carries_its_moments_and_interval",)),
    "export": Target("tempo/eval/export.py", ("tests/test_export_truth.py", "tests/test_grounding.py"),
                     ("tempo.eval.export.x_clip_saliency__*", "tempo.eval.export.x_annotation__*"),
                     "the synthetic truth (`clip_saliency`, `annotation`); the command's rendering is not mutated"),
    "device": Target("demo/device.py", ("tests/test_space_defaults.py", "tests/test_device_cost.py"),
                     ("demo.device.x_current_keys__*", "demo.device.xǁStepFitǁ*", "demo.device.xǁZeroGpuǁ*",
                      "demo.device.xǁGpuCostǁ*", "demo.device.x_gpu_seconds__*"),
                     "the cost model (`StepFit`, `ZeroGpu`, `GpuCost`, `gpu_seconds`)"),
    "times": Target("tempo/times.py", ("tests/test_times.py", "tests/test_times_given.py")),
    "clip": Target("tempo/video/clip.py", ("tests/test_clip_times.py", "tests/test_clip.py"),
                   ("tempo.video.clip.xǁClipǁ*", "tempo.video.clip.x_plan_cut__*", "tempo.video.clip.x_copy_audio__*",
                    "tempo.video.clip.x_stream_origin__*", "tempo.video.clip.x_shift__*"),
                   "the clip's time handling (`Clip`, `plan_cut`, `stream_origin`, `shift`, `copy_audio`)"),
    "metrics": Target("tempo/eval/metrics.py", ("tests/test_metrics_rules.py", "tests/test_grounding.py",
                                                "tests/test_grounding_official.py")),
    "highlights": Target("tempo/eval/highlights.py", ("tests/test_metrics_rules.py", "tests/test_grounding.py",
                                                      "tests/test_grounding_official.py")),
}

# Mutants that give the same outputs on every input, by mutmut's name, with why. The names hold for the source they
# were read from; a change to a module renumbers its mutants, so its entries are read again after it.
EQUIVALENT: dict[str, str] = {
    "tempo.allocation.x_adaptive_token_allocation__mutmut_7": "`n * k_min >= budget` for `>`: at equality the "
                                                              "anchors shrink to `budget // n`, which is `k_min`",
    "tempo.allocation.x_adaptive_token_allocation__mutmut_57": "the final clamp without `min=k_min`: every k is "
                                                               "`k_min` plus a floor of something non-negative",
    "tempo.allocation.x_adaptive_token_allocation__mutmut_58": "the final clamp without `max=k_max`: the ideal k is at "
                                                               "most k_min + (k_max - k_min); a proportional share is "
                                                               "below the ideal's, plus at most one",
    "tempo.allocation.x_adaptive_token_allocation__mutmut_59": "the final clamp without `min=k_min` (as mutant 57)",
    "tempo.allocation.x_adaptive_token_allocation__mutmut_60": "the final clamp without `max=k_max` (as mutant 58)",
    "tempo.allocation.x_allocate__mutmut_22": "uniform's `check_budget` without its strategy: the default, ATA, "
                                              "also gives every segment a token, so the check is the same",
    "tests.test_architecture.x_path_edits__mutmut_5": "`encoding=\"UTF-8\"` for `\"utf-8\"`: the same codec",
    "tests.test_architecture.x_path_edits__mutmut_3": "`encoding=None`: the locale's, UTF-8 wherever the suite runs "
                                                      "(equivalent there; a Latin-1 locale would misread non-ASCII)",
    "tests.test_architecture.x_imports__mutmut_16": "`encoding=\"UTF-8\"` for `\"utf-8\"`: the same codec",
    "tests.test_architecture.x_imports__mutmut_14": "`encoding=None`: as `path_edits`' mutant 3",
    "tempo.moments.x_stand_out__mutmut_101": "`start <= other.end` for `<`: at equality `start = other.end` sets "
                                             "start to what it is",
    "tempo.moments.x_stand_out__mutmut_105": "`other.start <= end` for `< end`: at equality `end = other.start` "
                                             "sets end to what it is",
    "tempo.eval.metrics.x__precision__mutmut_10": "the precision's opening sentinel 1 for 0: no step reads index 0 "
                                                  "(steps start at 1)",
    "tempo.eval.metrics.x_top_iou__mutmut_7": "`[:3]` for `[:2]`: the score rides along, and `overlap_iou` and "
                                              "`temporal_iou` read only the start and the end",
    "tempo.eval.highlights.x__clips__mutmut_6": "`dtype=None`: the annotators' scores are ints, read only by "
                                                "`>= level`, which ints and floats answer alike",
    "tempo.eval.highlights.x__clips__mutmut_8": "no `dtype`: as mutant 6",
    "tempo.eval.highlights.x__clips__mutmut_15": "`reshape(n, -2)`: NumPy (2.4) reads any negative size as the one "
                                                 "to infer, as -1",
    "tempo.eval.highlights.x_highlight_precision__mutmut_12": "`dtype=None`: the saliency is copied into a float "
                                                              "array, which casts it as `dtype=float` would",
    "tempo.eval.highlights.x_highlight_precision__mutmut_14": "no `dtype`: as mutant 12",
    "tempo.moments.x_stand_out__mutmut_34": "`low >= 0` for `> 0` in the run: at 0 it asks whether the last "
                                            "segment touches the first, which no video's segments in time order do",
    "tempo.moments.x__edges__mutmut_9": "`low >= 0` for `> 0`: as `stand_out`'s mutant 34, the last segment never "
                                        "touches the first",
    "tempo.moments.x__edges__mutmut_54": "`low >= 0` for `> 0` before the start's interpolation: as mutant 9",
    "tempo.moments.x_shown__mutmut_3": "`default=None` for the best of no moments: read only when there are none, "
                                       "and then nothing is shown either way",
    "tempo.moments.x_shown__mutmut_6": "`default=1.0`: as mutant 3",
    "tempo.times.x_clock_seconds__mutmut_13": "`len(parts) >= 1` for `> 1`: one part has no places before the "
                                              "seconds, so the check over `parts[:-1]` is over nothing either way",
}

# Survivors not yet killed, with why (they count as survived): what a test would need.
EXACT = "needs log-odds exactly equal after sigmoid and logit, which floats do not give on a grid a test can write"
STILL_ALIVE: dict[str, str] = {
    "demo.device.xǁStepFitǁfitted__mutmut_64": "1e12 + 1 for 1e12: a 1e-12 relative change, lost in the 5 decimals "
                                               "the fixed costs keep except at a rounding boundary",
    "demo.device.xǁGpuCostǁfitted__mutmut_80": "`round(10 * excess, 7)` for 6: differs only for an excess with a "
                                               "digit at its 8th decimal; benchmarks/gpu/cold_call.py writes 4",
    "tempo.eval.metrics.x__precision__mutmut_7": "the recall's closing sentinel 2 for 1: the extra step adds 0, "
                                                 "but one more term regroups NumPy's pairwise sum (from 8 terms), so "
                                                 "AP can differ in its last bit (39 of 15,325 hit patterns of up to "
                                                 "10 windows); a test would need AP to the last bit, which the rule "
                                                 "does not fix",
    "tempo.eval.metrics.x__precision__mutmut_31": "`recall[:+1]` for `recall[:-1]`: every recall past 0 is a step, "
                                                  "the extra ones adding 0, but they regroup the sum as mutant 7 does "
                                                  "(1,662 of 15,325 patterns differ in the last bit, e.g. hit, 4 "
                                                  "misses, hit, hit against 5 truths)",
    "tempo.moments.x__edges__mutmut_16": f"`>` for `>=` edge: {EXACT}",
    "tempo.moments.x__edges__mutmut_39": f"`>` for `>=` edge: {EXACT}",
    "tempo.moments.x__touch__mutmut_3": "`<=` TOUCH: needs a gap of exactly 1 ms in floats",
    "tempo.moments.x_stand_out__mutmut_94": "a segment's middle exactly on a moment's start: needs an edge exactly at "
                                            "a middle",
    "tempo.moments.x_stand_out__mutmut_98": "a segment's middle exactly on a moment's end, as mutant 94",
    "tempo.moments.x_stand_out__mutmut_102": "a better moment ending exactly where this one ends",
    "tempo.moments.x_stand_out__mutmut_104": "a better moment starting exactly where this one starts",
}


@dataclass
class Result:
    """One module's mutants by status (mutmut's words), the survivors' diffs, and how long the run took."""

    name: str
    statuses: dict[str, str] = field(default_factory=dict)
    diffs: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    commit: str = ""

    def count(self, statuses: tuple[str, ...]) -> int:
        return sum(1 for mutant, status in self.statuses.items() if status in statuses and mutant not in EQUIVALENT)

    @property
    def killed(self) -> int:
        return self.count(KILLED)

    @property
    def survived(self) -> int:
        return len(self.statuses) - self.killed - len(self.equivalent)

    @property
    def equivalent(self) -> list[str]:
        return sorted(mutant for mutant in self.statuses if mutant in EQUIVALENT)

    @property
    def score(self) -> float:
        return self.killed / max(1, self.killed + self.survived)


KILLED = ("killed", "timeout", "segfault", "caught by type check")  # mutmut's words for a mutant the tests caught


def workspace(target: Target, into: Path) -> Path:
    """A copy of the working tree (tracked files and new ones git does not ignore) with mutmut's settings."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    # mutmut runs the tests in its own copy (mutants/), which carries everything the tests may read
    carried = "".join(f"\n    {path.name}{'/' if path.is_dir() else ''}" for path in sorted(into.iterdir()))
    tests = "".join(f"\n    {path}" for path in target.tests)
    pytest = "".join(f"\n    {arg}" for arg in ("-p", "no:cacheprovider", "-m", "not slow", *target.options,
                                                  *(arg for test in target.deselect for arg in ("--deselect", test))))
    (into / "setup.cfg").write_text(
        f"[mutmut]\nsource_paths={target.source}\npytest_add_cli_args_test_selection={tests}\n"
        f"pytest_add_cli_args={pytest}\nalso_copy={carried}\n"
        f"timeout_multiplier={TIMEOUT_MULTIPLIER}\ntimeout_constant={TIMEOUT_CONSTANT}\n", encoding="utf-8")
    return into


def mutate(name: str, target: Target, jobs: int, only: tuple[str, ...] = ()) -> Result:
    """Run mutmut on one target in a scratch copy and read back each mutant's status (`only`: these mutants)."""
    from mutmut.stats import status_by_exit_code

    started = time.monotonic()
    # the tree mutmut copies: HEAD, with a "+" when it has changes not committed
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode
    with tempfile.TemporaryDirectory(prefix=f"mutation-{name}-") as scratch:
        where = workspace(target, Path(scratch))
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        mutmut = [sys.executable, "-m", "mutmut"]
        patterns = only or target.functions or ("*",)
        run = subprocess.run([*mutmut, "run", "--max-children", str(jobs), *patterns], cwd=where, env=env,
                             capture_output=True, text=True)
        if run.returncode:
            raise SystemExit(f"mutmut failed on {name}:\n{(run.stdout + run.stderr)[-3000:]}")
        meta = json.loads((where / "mutants" / f"{target.source}.meta").read_text(encoding="utf-8"))
        statuses = {mutant: status_by_exit_code[code] for mutant, code in meta["exit_code_by_key"].items()
                    if any(fnmatch.fnmatch(mutant, pattern) for pattern in patterns)}
        diffs = {mutant: shown(mutmut, mutant, where, env) for mutant, status in statuses.items()
                 if status not in KILLED}
    return Result(name, statuses, diffs, time.monotonic() - started, commit.stdout.strip() + "+" * bool(dirty))


def shown(mutmut: list[str], mutant: str, where: Path, env: dict[str, str]) -> str:
    """The mutant's change as a diff's -/+ lines."""
    out = subprocess.run([*mutmut, "show", mutant], cwd=where, env=env, capture_output=True, text=True).stdout
    return "\n".join(line for line in out.splitlines() if line[:1] in "-+" and line[:3] not in ("---", "+++"))


def report(results: list[Result], path: Path) -> None:
    """The scores, the survivors' diffs and the equivalent mutants, as markdown."""
    from importlib.metadata import version

    intro = (f"`make mutation` (`python -m benchmarks.mutation`), mutmut {version('mutmut')}, on "
             f"{datetime.date.today()}: each module mutated against its own fast test files; the score is killed over "
             "killed plus survived (a timeout is a kill, a mutant no test reaches survives); equivalent mutants (the "
             f"same outputs on every input) are listed with why, not counted. Each module must hold {GOAL:.0%}. The "
             "minutes and the commit (`+`: with changes not committed) are a module's last full run; survivors "
             "checked again with `--only` after a new test keep them.")
    lines = ["# Mutation scores", "", *textwrap.wrap(intro, 120), "",
             "| module | source | tests | killed | survived | equivalent | score | minutes | at |",
             "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        target = TARGETS[result.name]
        tests = ", ".join(f"`{Path(test).name}`" for test in target.tests)
        lines.append(f"| {result.name} | `{target.source}` | {tests} | {result.killed} | {result.survived} | "
                     f"{len(result.equivalent)} | {result.score:.1%} | {result.seconds / 60:.1f} | {result.commit} |")
    lines += ["", *(f"- {r.name}: {TARGETS[r.name].note}" for r in results if TARGETS[r.name].note)]
    for result in results:
        if set(result.diffs) - set(EQUIVALENT):
            lines += ["", f"## Survivors: {result.name}", ""]
            for mutant, diff in sorted((m, d) for m, d in result.diffs.items() if m not in EQUIVALENT):
                why = textwrap.wrap(STILL_ALIVE[mutant], 118) if mutant in STILL_ALIVE else []
                lines += [f"- `{mutant}` ({result.statuses[mutant]})", "", *(f"  {line}" for line in why),
                          *([""] if why else []), "  ```diff", *(f"  {line}" for line in diff.splitlines()), "  ```"]
        if result.equivalent:
            lines += ["", f"## Equivalent: {result.name}", ""]
            lines += [line for mutant in result.equivalent
                      for line in textwrap.wrap(f"- `{mutant}`: {EQUIVALENT[mutant]}", 120, subsequent_indent="  ")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--module", action="append", choices=sorted(TARGETS), help="only these (default: all)")
    parser.add_argument("--report", type=Path, default=REPORT, help=f"where the report goes (default {REPORT})")
    parser.add_argument("--jobs", type=int, default=1, help="mutants at once (default 1)")
    parser.add_argument("--only", nargs="+", default=(), metavar="MUTANT",
                        help="run only these mutants (mutmut's names or patterns) again, the module's others kept")
    args = parser.parse_args(argv)
    # The report keeps the modules not run this time, as last measured (their statuses in a JSON beside it).
    store = args.report.with_suffix(".json")
    kept = {name: Result(**fields) for name, fields in json.loads(store.read_text(encoding="utf-8")).items()} \
        if store.is_file() else {}
    for name in args.module or list(TARGETS):
        result = mutate(name, TARGETS[name], args.jobs, tuple(args.only))
        if args.only and name in kept:  # the survivors checked again: their new statuses over the last full run's
            last = kept[name]
            result = Result(name, {**last.statuses, **result.statuses},
                            {m: d for m, d in {**last.diffs, **result.diffs}.items()
                             if {**last.statuses, **result.statuses}[m] not in KILLED}, last.seconds, last.commit)
        kept[name] = result
        print(f"{name}: {result.killed} killed, {result.survived} survived, {len(result.equivalent)} equivalent: "
              f"{result.score:.1%} ({result.seconds / 60:.1f} min)", flush=True)
    results = [kept[name] for name in TARGETS if name in kept]
    store.write_text(json.dumps({r.name: vars(r) for r in results}, indent=1, ensure_ascii=False) + "\n",
                     encoding="utf-8")
    report(results, args.report)
    return 0 if all(kept[name].score >= GOAL for name in args.module or TARGETS) else 1


if __name__ == "__main__":
    sys.exit(main())
