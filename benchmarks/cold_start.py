"""The Space's cold start from the hub cache that its README front matter preloads (`preload_from_hub`).

It builds that cache in a temporary HF_HOME the way a Space's build leaves it (models--Org--Name/snapshots/<sha>,
refs/main): for each preloaded repo, the whole repo or the named files, taken from the tiny conformance model that
stands in for Vision-CAIR/Tempo-6B and Qwen/Qwen3-VL-2B-Instruct (its base made tied and single-file, as the real
2B is). Then a fresh process whose Python sockets refuse every connection (inside a network namespace too, where
`unshare -rn` works) loads the Space's model by its hub id, as demo/launch.py does on a Space. It does so with
HF_HUB_OFFLINE=1, as a Space runs (HF_HUB_OFFLINE unset), and with the base weights left out of the preload, and
reports the load time, every network attempt, and which preloaded files were read.

    python -m benchmarks.cold_start [--json result.json]
"""

from __future__ import annotations

import argparse
import ast
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(os.environ.get("TEMPO_FIXTURES", ROOT / "tests" / "fixtures" / "conformance"))
STAND_INS = {"Vision-CAIR/Tempo-6B": "tempo", "Qwen/Qwen3-VL-2B-Instruct": "base/tiny-qwen3-vl"}
FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"
UNREAD = 1_000_000.0  # an access time in 1970: any read after it moves the file's atime (relatime included)
# The base's small files only, what preloading it without its 4.26 GB weights would name.
BASE_WITHOUT_WEIGHTS = ("config.json,tokenizer.json,tokenizer_config.json,preprocessor_config.json,"
                        "video_preprocessor_config.json")


@dataclass(frozen=True)
class Preload:
    """One `preload_from_hub` item: a repo, the files named (None: the whole repo) and an optional commit."""

    repo: str
    files: tuple[str, ...] | None = None
    commit: str | None = None


# ----------------------------------------------------------------------------------------------- front matter

def front_matter(text: str) -> dict:
    """The YAML between the two `---` lines that open a Space's README."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in (line.strip() for line in lines[1:]):
        raise ValueError("the README does not open with a --- front matter block")
    end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    return yaml.safe_load("\n".join(lines[1:end])) or {}


def preloads(config: dict) -> dict[str, Preload]:
    """`preload_from_hub` by repo id: 'repo', 'repo file1,file2' or 'repo file1,file2 commit'."""
    found = {}
    for item in config.get("preload_from_hub") or []:
        repo, *rest = str(item).split()
        files = tuple(name for name in rest[0].split(",") if name) if rest else None
        found[repo] = Preload(repo, files, rest[1] if len(rest) > 1 else None)
    return found


def space_model() -> str:
    """`demo.launch.SPACE_MODEL`, read from the source: importing the demo would import Gradio (6 s)."""
    tree = ast.parse((ROOT / "demo" / "launch.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SPACE_MODEL" for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError("demo/launch.py has no SPACE_MODEL")


# ------------------------------------------------------------------------------------------------- fake cache

def tied_base(source: Path, target: Path) -> Path:
    """The tiny base as Qwen3-VL-2B-Instruct is stored: tied embeddings (no lm_head.weight), one weight file."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target)
    tensors = load_file(source / "model.safetensors")
    del tensors["lm_head.weight"]
    save_file(tensors, target / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    config["tie_word_embeddings"] = True
    config.get("text_config", {})["tie_word_embeddings"] = True
    (target / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return target


def cache_repo(hub: Path, preload: Preload, source: Path) -> list[str]:
    """Put `source`'s files (the named ones, or all) in the hub cache layout; returns the names cached."""
    commit = preload.commit or FAKE_COMMIT
    repo = hub / f"models--{preload.repo.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    names = sorted(p.name for p in source.iterdir()) if preload.files is None else list(preload.files)
    cached = []
    for name in names:
        if not (source / name).is_file():
            continue  # named in the front matter but not in the stand-in: nothing to mirror
        blob = repo / "blobs" / f"{len(cached):04d}-{name}"
        shutil.copy(source / name, blob)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
        cached.append(name)
    return cached


def build_cache(home: Path, readme: str, fixtures: Path = FIXTURES) -> dict[str, list[str]]:
    """The hub cache under `home` that `readme`'s front matter preloads, with the stand-ins' files."""
    stand_ins = {repo: fixtures / folder for repo, folder in STAND_INS.items()}
    stand_ins["Qwen/Qwen3-VL-2B-Instruct"] = tied_base(stand_ins["Qwen/Qwen3-VL-2B-Instruct"], home / "stand-in-base")
    return {repo: cache_repo(home / "hub", preload, stand_ins[repo])
            for repo, preload in preloads(front_matter(readme)).items() if repo in stand_ins}


def without_base_weights(readme: str) -> str:
    """`readme` with the base preloaded as its small files only (the alternative to preloading its weights)."""
    base = "  - Qwen/Qwen3-VL-2B-Instruct\n"
    head, found, tail = readme.partition("preload_from_hub:\n")
    if not found or base not in tail:
        raise ValueError("no whole-repo preload of Qwen/Qwen3-VL-2B-Instruct in the front matter")
    return head + found + tail.replace(base, f"  - Qwen/Qwen3-VL-2B-Instruct {BASE_WITHOUT_WEIGHTS}\n", 1)


# ---------------------------------------------------------------------------------------- what the start touched

def cache_files(home: Path) -> list[Path]:
    return sorted(p for p in (home / "hub").rglob("*") if p.is_file() and "snapshots" in p.parts)


def mark_unread(home: Path) -> list[Path] | None:
    """Set every cached file's access time to 1970 and return those files; None when this filesystem does not
    record reads."""
    probe = home / "atime-probe"
    probe.write_bytes(b"x")
    marked = cache_files(home)
    for path in [probe, *marked]:
        os.utime(path, (UNREAD, path.stat().st_mtime))
    probe.read_bytes()
    recorded = probe.stat().st_atime > UNREAD + 1
    probe.unlink()
    return marked if recorded else None


def files_read(marked: list[Path]) -> dict[str, list[str]]:
    """Per repo, the marked files whose access time moved since `mark_unread` (mmap counts as a read)."""
    read: dict[str, list[str]] = {}
    for path in marked:
        if path.stat().st_atime > UNREAD + 1:
            repo = next(part for part in path.parts if part.startswith("models--"))
            read.setdefault(repo.removeprefix("models--").replace("--", "/"), []).append(path.name)
    return read


def isolated() -> list[str]:
    """`unshare -rn` (a network namespace with no route out) where this machine allows it, else nothing."""
    try:
        subprocess.run(["unshare", "-rn", "true"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return ["unshare", "-rn"]


def child_env(home: Path, offline: bool) -> dict[str, str]:
    """This environment with the hub cache under `home`, and HF_HUB_OFFLINE=1 or unset (as on a Space)."""
    # Settings that would point the child at another cache or model, or take it offline behind our back.
    dropped = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TEMPO_MODEL",
               "TEMPO_BASE")
    env = {name: value for name, value in os.environ.items() if name not in dropped}
    env |= {"HF_HOME": str(home), "TEMPO_CACHE": str(home / "tempo-cache")}
    return env | {"HF_HUB_OFFLINE": "1"} if offline else env


def cold_start(home: Path, offline: bool, model: str | None = None) -> dict:
    """Load `model` (default: the Space's) in a fresh process from the cache under `home`, no network reachable."""
    env = child_env(home, offline)
    before = set(home.rglob("*"))
    marked = mark_unread(home)
    namespace = isolated()
    started = time.perf_counter()
    command = [sys.executable, "-m", "benchmarks.cold_start", "--child", model or space_model()]
    done = subprocess.run([*namespace, *command], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    wall = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    run = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {
        "loaded": False, "network_attempts": [], "error": done.stderr.strip()[-2000:]}
    written = sorted(str(p.relative_to(home)) for p in set(home.rglob("*")) - before if p.is_file())
    return run | {"process_s": round(wall, 2), "network_namespace": bool(namespace),
                  "files_read": None if marked is None else files_read(marked), "files_written": written}


# -------------------------------------------------------------------------------------------- the child process

def caller() -> str:
    """The innermost frame above the HTTP and socket layers: who asked for the network."""
    plumbing = ("socket.py", "contextlib.py", "httpx", "httpcore", "urllib3", "requests", "cold_start.py")
    frame = next((f for f in reversed(traceback.extract_stack()) if not any(p in f.filename for p in plumbing)), None)
    return f"{Path(frame.filename).name}:{frame.name}" if frame else "?"


def refuse_network(attempts: list[str]) -> None:
    """Every Python socket connection and name lookup fails, and is noted, as on a machine with no route out."""
    import socket

    def refuse(what: str):
        attempts.append(f"{what} ({caller()})")
        raise OSError(errno.ENETUNREACH, f"network blocked by cold_start.py: {what}")

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(sock: socket.socket, address):
        return real_connect(sock, address) if sock.family == socket.AF_UNIX else refuse(f"connect {address}")

    def connect_ex(sock: socket.socket, address):
        return real_connect_ex(sock, address) if sock.family == socket.AF_UNIX else refuse(f"connect {address}")

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    socket.getaddrinfo = lambda host, port, *args, **kwargs: refuse(f"resolve {host}:{port}")


def child(model: str) -> None:
    """Import tempo and load `model` on the CPU with the network refused; one JSON line on stdout."""
    attempts: list[str] = []
    refuse_network(attempts)
    started = time.perf_counter()
    import tempo

    imported = time.perf_counter()
    figures = {"model": model, "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE", "")}
    try:
        loaded = tempo.from_pretrained(model, device="cpu")
        figures |= {"loaded": True, "memory_tokens": loaded.spec.num_memory_tokens}
    except Exception as exc:  # the report says how it failed
        figures |= {"loaded": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    figures |= {"import_s": round(imported - started, 2), "load_s": round(time.perf_counter() - imported, 2),
                "network_attempts": attempts}
    print(json.dumps(figures))


# ------------------------------------------------------------------------------------------------------- report

RUNS = {  # name: (HF_HUB_OFFLINE=1, the base's weights preloaded)
    "HF_HUB_OFFLINE=1": (True, True),
    "as a Space runs (HF_HUB_OFFLINE unset)": (False, True),
    "base weights not preloaded, HF_HUB_OFFLINE unset": (False, False),
}


def attempts_summary(attempts: list[str]) -> str:
    """'none', or how many connections were refused and who asked, e.g. '3 refused: model_info x2, ...'."""
    if not attempts:
        return "none"
    callers = [attempt.rpartition("(")[2].rstrip(")").rpartition(":")[2] for attempt in attempts]
    named = {caller: callers.count(caller) for caller in callers}
    return f"{len(attempts)} refused: " + ", ".join(f"{c} x{n}" if n > 1 else c for c, n in named.items())


def print_table(results: dict[str, dict]) -> None:
    print(f"{'start':<50} {'loaded':<7} {'import s':>8} {'load s':>7}  network")
    for name, run in results.items():
        print(f"{name:<50} {'yes' if run['loaded'] else 'NO':<7} {run.get('import_s', '-'):>8} "
              f"{run.get('load_s', '-'):>7}  {attempts_summary(run['network_attempts'])}")
    for name, run in results.items():
        read = run["files_read"]
        print(f"\n{name}:\n  read: " + ("not recorded (no access times on this filesystem)" if read is None else
                                         "; ".join(f"{repo}: {', '.join(files)}" for repo, files in read.items())))
        print("  written: " + (", ".join(run["files_written"]) or "nothing"))
        print("  network: " + ("; ".join(run["network_attempts"]) or "none"))
        if not run["loaded"]:
            print(f"  error: {run.get('error', '')[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    results = {}
    for name, (offline, weights) in RUNS.items():
        with tempfile.TemporaryDirectory(prefix="tempo-cold-start-") as home:
            build_cache(Path(home), readme if weights else without_base_weights(readme))
            results[name] = cold_start(Path(home), offline)
    print(f"Cold start of {space_model()} (stand-in: the tiny conformance model) from the preloaded hub cache, "
          f"CPU, network refused{' (network namespace too)' if results[next(iter(RUNS))]['network_namespace'] else ''}")
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
