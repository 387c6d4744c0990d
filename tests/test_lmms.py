"""Tempo as an lmms-eval model (`tempo[lmms]`): the real `lmms-eval` command runs a local task offline through the
entry point, on one process and on two ranks, and answers what `tempo.answer` answers."""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lmms_eval.api.instance import Instance  # noqa: E402  (importable once tempo.integrations.lmms is)

import tempo
from tempo.errors import InputError
from tempo.integrations import lmms  # without the extra this fails, naming its install command (`make` has it)
from tempo.train.eval_videos import write_jobs
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

BUDGET = 64
MAX_NEW_TOKENS = 12
TASK = "tempo_synthetic"


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    """A local lmms-eval task: four questions about a synthetic video (and one about a file that is missing) in a
    JSON dataset, and a YAML that scores exact matches."""
    directory = tmp_path_factory.mktemp("lmms-task")
    write_jobs(str(directory / "jobs.jsonl"), 1, 900, [BUDGET], 20.0, 20.0, str(directory / "videos"))
    docs = [{"video": job["video"], "question": job["question"], "answer": job["expected"]}
            for job in map(json.loads, (directory / "jobs.jsonl").read_text().splitlines())]
    docs.append({"video": str(directory / "missing.mp4"), "question": "What colour is the star?", "answer": "red"})
    (directory / "data.json").write_text(json.dumps(docs), encoding="utf-8")
    (directory / f"{TASK}.yaml").write_text(f"""task: {TASK}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {directory / "data.json"}
test_split: test
output_type: generate_until
doc_to_visual: video
doc_to_text: question
doc_to_target: answer
generation_kwargs:
  max_new_tokens: {MAX_NEW_TOKENS}
  temperature: 0
  top_p: 1.0
  num_beams: 1
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
""", encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def tiny() -> tempo.TempoModel:
    return tempo.from_pretrained(None, device="cpu")


@pytest.fixture(scope="module")
def expected(tiny, task) -> list[tempo.Finished | None]:
    """What `tempo.answer` gives for each doc under the task's settings (None where the video is missing)."""
    config = tempo.RunConfig(allocation=tempo.AllocationConfig(budget=BUDGET),
                             generation=tempo.GenerationConfig(max_new_tokens=MAX_NEW_TOKENS))
    docs = json.loads((task / "data.json").read_text())
    return [tempo.answer(tiny, doc["video"], doc["question"], config) if os.path.exists(doc["video"]) else None
            for doc in docs]


def lmms_eval(task: Path, out: Path, launcher: list[str], model_args: str) -> subprocess.CompletedProcess:
    """The lmms-eval command line on the local task, offline, its caches inside the test's folder."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(out / "hf")}
    command = [*launcher, "--model", "tempo", "--model_args", model_args, "--tasks", TASK, "--include_path",
               str(task), "--output_path", str(out / "results"), "--log_samples"]
    result = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=300)
    failed = result.returncode != 0 or "Error during evaluation" in result.stdout + result.stderr  # it exits 0
    assert not failed, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def read_run(out: Path) -> tuple[dict, list[dict], list[dict]]:
    """lmms-eval's results and samples files, and the allocation log."""
    (results,) = glob.glob(str(out / "results" / "**" / "*_results.json"), recursive=True)
    (samples,) = glob.glob(str(out / "results" / "**" / f"*_samples_{TASK}.jsonl"), recursive=True)
    samples_lines = Path(samples).read_text(encoding="utf-8").splitlines()
    allocation_lines = (out / "allocations.jsonl").read_text(encoding="utf-8").splitlines()
    return (json.loads(Path(results).read_text()), [json.loads(line) for line in samples_lines],
            [json.loads(line) for line in allocation_lines])


def test_lmms_eval_runs_a_local_task_through_the_entry_point(task, expected, tmp_path):
    lmms_eval(task, tmp_path, [sys.executable, "-m", "lmms_eval"],
              f"pretrained={ROOT / 'assets' / 'tempo-tiny'},budget={BUDGET},strategy=ata,max_frames=1024,"
              f"allocation_log={tmp_path / 'allocations.jsonl'}")
    results, samples, allocations = read_run(tmp_path)
    samples.sort(key=lambda sample: sample["doc_id"])
    assert [s["filtered_resps"] for s in samples] == [f.answer if f else "" for f in expected]
    assert [s["token_counts"][0]["input_tokens"] for s in samples] == [f.tokens_used if f else 0 for f in expected]
    matches = [float(s["filtered_resps"].lower() == s["target"].lower()) for s in samples]
    assert [s["exact_match"] for s in samples] == matches
    assert results["results"][TASK]["exact_match,none"] == pytest.approx(sum(matches) / len(matches))
    by_id = {line["id"]: line for line in allocations}
    for doc_id, finished in enumerate(expected):
        line = by_id[f"{TASK}/{doc_id}"]
        if finished is None:
            assert "not found" in line["error"]
        else:
            assert [s["tokens"] for s in line["segments"]] == [s.tokens for s in finished.segments]
            assert line["tokens_used"] == finished.tokens_used <= line["budget"] == BUDGET


def test_two_ranks_split_the_task_and_give_the_same_answers(task, expected, tmp_path):
    """torchrun starts two CPU processes; lmms-eval gives each rank half the docs through the model's rank and
    world size, and gathers them (`accelerate launch --num_processes N` does the same over GPUs)."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "lmms_eval"]
    lmms_eval(task, tmp_path, torchrun, f"budget={BUDGET},allocation_log={tmp_path / 'allocations.jsonl'}")
    _, samples, allocations = read_run(tmp_path)
    assert sorted(s["doc_id"] for s in samples) == list(range(len(expected)))
    assert {s["doc_id"]: s["filtered_resps"] for s in samples} == {i: f.answer if f else ""
                                                                  for i, f in enumerate(expected)}
    assert sorted(line["id"] for line in allocations) == sorted(f"{TASK}/{i}" for i in range(len(expected)))


def test_model_args_are_checked_by_the_settings_table():
    with pytest.raises(InputError, match="Visual token budget must be a number"):
        lmms.Tempo(budget="lots")
    with pytest.raises(InputError, match="Allocation strategy must be one of ata"):
        lmms.Tempo(strategy="best")
    with pytest.raises(InputError, match="no argument frames; it takes pretrained"):
        lmms.Tempo(frames=8)
    with pytest.raises(InputError, match="one request at a time"):
        lmms.Tempo(batch_size=4)
    with pytest.raises(InputError, match="dtype must be one of"):
        lmms.Tempo(dtype="int4")


def test_generation_kwargs_follow_the_task_through_the_same_table(tiny):
    base = tempo.RunConfig()
    config = lmms.request_config(base, {"max_new_tokens": 7, "temperature": 0.7, "do_sample": False}, tiny)
    assert (config.generation.max_new_tokens, config.generation.temperature) == (7, 0.0)
    assert lmms.request_config(base, {"temperature": 0.5, "top_p": 0.9}, tiny).generation.top_p == 0.9
    with pytest.raises(InputError, match="Max new tokens 5000 is greater than maximum 2048"):
        lmms.request_config(base, {"max_new_tokens": 5000}, tiny)
    with pytest.raises(InputError, match="beam search"):
        lmms.request_config(base, {"num_beams": 4}, tiny)
    with pytest.raises(InputError, match="Top-p 0 is less than minimum"):
        lmms.request_config(base, {"top_p": 0}, tiny)
    assert lmms.cut("red star. The end", lmms.stop_strings({"until": ["."]})) == "red star"
    assert lmms.cut("red star", lmms.stop_strings({"until": "\n\n"})) == "red star"
    with pytest.raises(InputError, match="one video file per question; this task gives 2 visuals"):
        lmms.video_path(["a.mp4", "b.mp4"])


def test_multi_round_requests_answer_each_round(task, expected):
    """generate_until_multi_round asks the task's doc_to_text for each next round until it says it is done."""
    model = lmms.Tempo(budget=BUDGET)
    docs = json.loads((task / "data.json").read_text())
    model.task_dict = {TASK: {"test": docs}}

    def doc_to_text(doc, previous_output, round_idx, previous_round_info):
        return [doc["video"]], docs[1]["question"], round_idx == 2, previous_output, None

    kwargs = {"max_new_tokens": MAX_NEW_TOKENS, "do_sample": False}
    request = Instance("generate_until_multi_round", (docs[0]["question"], kwargs, lambda doc: [doc["video"]],
                                                      doc_to_text, 0, TASK, "test"), 0,
                       metadata={"task": TASK, "doc_id": 0, "repeats": 1})
    (answers,) = model.generate_until_multi_round([request])
    assert answers == [expected[0].answer, expected[1].answer]


def test_loglikelihood_says_which_tasks_need_it():
    with pytest.raises(NotImplementedError, match="loglikelihood or multiple_choice.*generate_until"):
        lmms.Tempo.loglikelihood(object.__new__(lmms.Tempo), [])


def test_the_extras_leave_the_core_installable_and_imported_lazily(tmp_path):
    """`import tempo` works beside both extras, imports neither engine, and torch is still the pinned CPU build
    (lmms-eval's own requirements would have brought a CUDA torchvision); the code of the paper's four tasks loads."""
    pinned = (ROOT / "constraints-cpu.txt").read_text().split("torch==")[1].split()[0]
    code = ("import sys, importlib.util, tempo, torch\n"
            "assert not {'ray', 'lmms_eval'} & set(sys.modules), 'import tempo imported an engine'\n"
            "import lmms_eval.api.model, ray.data, tempo.integrations.lmms, tempo.integrations.ray_batch\n"
            "for task in ('videomme', 'lvbench', 'mlvu', 'longvideobench'):  # the paper's tasks' own code\n"
            "    __import__(f'lmms_eval.tasks.{task}.utils')\n"
            "print(torch.__version__, torch.version.cuda, importlib.util.find_spec('torchvision') is None)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HF_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    version, cuda, no_torchvision = result.stdout.splitlines()[-1].split()
    assert (version.split("+")[0], cuda, no_torchvision) == (pinned, "None", "True"), result.stdout
    (entry,) = [e for e in importlib.metadata.entry_points(group="lmms_eval.models") if e.name == "tempo"]
    assert entry.value == "tempo.integrations:lmms_manifest"
    assert entry.load()().simple_class_path == "tempo.integrations.lmms.Tempo"
