"""Which way of building and loading the decoder's compiled layer step (`tempo.model.compiled_decoding`) loads and
runs here: each variant in a process of its own, so that a crash (torch 2.11.0+cu130 segfaulted in the first
`aoti_load_package` on an H200, 2026-11-28) names its cause. A bare Qwen3 decoder with random weights (the same in
every process: seeded) at Tempo-6B's layer sizes or tiny ones; each variant runs every layer's compiled step once
outside any capture, then (on a GPU) captures them in one CUDA graph and replays it, as the compiled part will,
against the eager `layer_step`, and checks that a cache of the wrong length is refused.

    python -m benchmarks.gpu.aoti_probe all DIR [--sizes 6b|tiny] [--layers N] [--variants a,b] [--json FILE]
    python -m benchmarks.gpu.aoti_probe build DIR BUILD [--sizes ...]     one package (BUILD: weightless, spaces,
                                                                          in_so, spaces_helpers)
    python -m benchmarks.gpu.aoti_probe load VARIANT DIR [--sizes ...]   one variant: prints its figures as JSON

`all` builds what the variants need, then runs each; the GPU check's `loader` part runs it first and hands the
first variant in `PREFERRED` that passed to its compiled part.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmarks.gpu import aoti_env

log = logging.getLogger("gpu-check")


@dataclass(frozen=True)
class Variant:
    """One way to build and load the layer step: `build` names `compiled_decoding.BUILDS` (or "spaces_helpers":
    `spaces`' own `aoti_compile_and_save` and `LazyAOTIModel`), `loader` one of `compiled_decoding.LOADERS` (or
    "spaces")."""

    build: str = "weightless"
    loader: str = "per_layer"
    single_threaded: bool = False


VARIANTS = {
    "plain": Variant(),  # the compiled part's way until now: the crash on torch 2.11.0+cu130
    "single": Variant(single_threaded=True),
    "in_so": Variant(build="in_so"),
    "spaces_settings": Variant(build="spaces"),
    "once": Variant(loader="once"),
    "spaces": Variant(build="spaces_helpers", loader="spaces"),
}
# The compiled part's choice among those that passed (on a GPU, captured in a CUDA graph too): one loaded copy
# before one per layer, unchanged settings before changed ones. `spaces` is not among them (its loader patches
# modules; the check measures ours).
PREFERRED = ("once", "plain", "single", "spaces_settings", "in_so")
ATTENTION = "split"  # the package that crashed
TOKENS = 4


def config(sizes: str, layers: int):
    from transformers import Qwen3Config

    if sizes == "6b":  # Qwen3-4B's layer, Tempo-6B's decoder; a small vocabulary (the probe runs layers only)
        return Qwen3Config(hidden_size=2560, intermediate_size=9728, num_hidden_layers=layers, num_attention_heads=32,
                           num_key_value_heads=8, head_dim=128, vocab_size=1024, tie_word_embeddings=True)
    return Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, vocab_size=256, tie_word_embeddings=True)


def decoder(sizes: str, layers: int, device: str):
    """The same random decoder in every process (seeded), bf16 on a GPU, float32 on a CPU."""
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            lm = Qwen3ForCausalLM(config(sizes, layers)).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    for parameter in lm.parameters():  # random init's scale in every layer (transformers may leave some zero)
        parameter.data.normal_(0, 0.02) if parameter.dim() > 1 else parameter.data.fill_(1.0)
    return lm


def package_path(directory: Path, build: str) -> Path:
    return directory / ("spaces-package" if build == "spaces_helpers" else f"{ATTENTION}-{build}.pt2")


def build_one(lm, directory: Path, build: str) -> float:
    from tempo.model import compiled_decoding

    path = package_path(directory, build)
    if build != "spaces_helpers":
        seconds = compiled_decoding.build(lm, path, ATTENTION, build)
    else:
        import spaces

        started = time.perf_counter()
        program = compiled_decoding.export_layer(lm, ATTENTION)
        spaces.aoti_compile_and_save(path, program)
        seconds = time.perf_counter() - started
    aoti_env.after_build(path)  # the loader part's diagnosis may ask for the stack's exec bit cleared
    return seconds


def spaces_layers(lm, directory: Path) -> list:
    """`spaces`' own loader over the layer steps: one `LazyAOTIModel` re-pointed at each wrapper's weights."""
    from spaces.zero.torch.aoti import aoti_load_from_module_dir

    from tempo.model.compiled_decoding import _Layer

    wrappers = torch.nn.ModuleList([_Layer(block, ATTENTION) for block in lm.model.layers])
    aoti_load_from_module_dir(wrappers, package_path(directory, "spaces_helpers") / "root")
    return list(wrappers)


@torch.inference_mode()
def load_and_run(name: str, directory: Path, sizes: str, layers: int, device: str) -> dict:
    """One variant: load, run every layer `TOKENS` times against the eager step, then a cache of a wrong length."""
    from tempo.model.compiled_decoding import CompiledLayers, example_inputs
    from tempo.model.static_decoding import layer_step

    variant = VARIANTS[name]
    capture = device == "cuda" and variant.loader != "spaces"  # spaces' loader re-points in Python at each call
    lm = decoder(sizes, layers, device)
    started = time.perf_counter()
    if variant.loader == "spaces":
        steps = spaces_layers(lm, directory)
    else:
        steps = list(CompiledLayers(package_path(directory, variant.build), lm, variant.loader,
                                    variant.single_threaded))
    loaded = time.perf_counter() - started
    hidden, cos, sin, slot, visible, keys, values = example_inputs(lm, 2)
    hidden = torch.randn(hidden.shape, generator=torch.Generator().manual_seed(1)).to(hidden)
    caches = [(keys.clone(), values.clone()) for _ in range(2 * layers)]

    def through(run_layer, first_cache: int) -> torch.Tensor:
        x = hidden
        for i in range(layers):
            x = run_layer(i, x, *caches[first_cache + i])
        return x

    def compiled(i, x, k, v):
        return steps[i](x, cos, sin, slot, visible, k, v)

    def eager(i, x, k, v):
        return layer_step(lm.model.layers[i], x, cos, sin, slot, visible, k, v, ATTENTION)

    out = through(compiled, 0)  # the first run, outside any capture
    _synchronize(device)
    first_s = time.perf_counter() - started
    if capture:
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            through(compiled, 0)
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            captured = through(compiled, 0)
        for _ in range(TOKENS):
            graph.replay()
        out = captured.clone()
    else:
        for _ in range(TOKENS - 1):
            out = through(compiled, 0)
    reference = through(eager, layers)
    for _ in range(TOKENS - 1):
        reference = through(eager, layers)
    _synchronize(device)
    difference = ((out.float() - reference.float()).norm() / reference.float().norm()).item()
    # `spaces`' loader checks no shape: a wrong cache would be read out of bounds
    refused = None if variant.loader == "spaces" else wrong_cache_refused(steps[0], hidden, cos, sin, slot, keys)
    tolerance = 5e-2 if device == "cuda" else 1e-4  # bf16 (conformance.report.BF16_RTOL) or float32 in another order
    return {"loaded": True, "load_s": round(loaded, 3), "first_run_s": round(first_s, 3),
            "relative_difference": difference, "output_norm": out.float().norm().item(),
            "within_tolerance": difference <= tolerance,
            "wrong_cache_refused": refused, "graph": capture, **asdict(variant)}


def wrong_cache_refused(step, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, slot: torch.Tensor,
                        keys: torch.Tensor) -> bool:
    """Whether a compiled layer step refuses a cache of one slot more than whole pieces (AOTI checks no shape)."""
    from tempo.model.static_decoding import SPLIT

    wrong = torch.zeros(1, keys.shape[1], SPLIT + 1, keys.shape[3], dtype=keys.dtype, device=keys.device)
    try:
        step(hidden, cos, sin, slot, torch.ones(SPLIT + 1, dtype=torch.bool, device=keys.device), wrong, wrong)
    except ValueError:
        return True
    return False


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_all(directory: Path, sizes: str, layers: int, names: list[str], device: str, timeout: float = 300.0,
            at_once: int = 1) -> dict:
    """Build each package the variants need (in this process), then each variant in its own, `at_once` at a time;
    `passed` lists those that loaded, ran within tolerance and refused the wrong cache; `chosen` the first of
    `PREFERRED` among them."""
    directory.mkdir(parents=True, exist_ok=True)
    figures: dict = {"torch": torch.__version__, "device": device, "sizes": sizes, "layers": layers, "builds": {},
                     "variants": {}}
    lm = decoder(sizes, layers, device)
    builds = []
    for name in names:
        variant = VARIANTS[name]
        if variant.build not in builds:
            builds.append(variant.build)
    for build in builds:
        try:
            figures["builds"][build] = {"build_s": round(build_one(lm, directory, build), 2)}
        except Exception as exc:  # recorded; the variants that need it say so
            log.error("building the %s package failed: %s", build, exc)
            figures["builds"][build] = {"error": f"{type(exc).__name__}: {str(exc)[-800:]}"}
    del lm

    def variant(name: str) -> dict:
        build = VARIANTS[name].build
        if "error" in figures["builds"].get(build, {}):
            return {"error": f"its package ({build}) was not built"}
        result = one_process(name, directory, sizes, layers, timeout)
        log.info("loader variant %s: %s", name, {k: v for k, v in result.items() if k != "stderr"})
        return result

    with ThreadPoolExecutor(at_once) as pool:
        figures["variants"] = dict(zip(names, pool.map(variant, names)))
    figures["passed"] = [name for name, result in figures["variants"].items()
                         if result.get("within_tolerance") and result.get("wrong_cache_refused") is not False]
    figures["chosen"] = next((name for name in PREFERRED if name in figures["passed"]), None)
    return figures


def one_process(name: str, directory: Path, sizes: str, layers: int, timeout: float) -> dict:
    """`load` in a fresh interpreter: its figures, or how it died (the signal's name) with its stderr's end."""
    command = [sys.executable, "-m", "benchmarks.gpu.aoti_probe", "load", name, str(directory), "--sizes", sizes,
               "--layers", str(layers)]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    except subprocess.TimeoutExpired:
        return {"error": f"no answer in {timeout:.0f} s"}
    seconds = round(time.perf_counter() - started, 1)
    if done.returncode < 0:
        return {"error": f"died of {signal.Signals(-done.returncode).name}", "process_s": seconds,
                "stderr": done.stderr[-2500:]}
    if done.returncode:
        return {"error": f"exit {done.returncode}", "process_s": seconds, "stderr": done.stderr[-2500:]}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process_s": seconds}


def main(argv: list[str] | None = None) -> int:
    faulthandler.enable()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu.aoti_probe", description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("all", "build", "load"))
    parser.add_argument("args", nargs="+", help="all: DIR; build: DIR BUILD; load: VARIANT DIR")
    parser.add_argument("--sizes", choices=("6b", "tiny"), default="6b")
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="for `all`: comma-separated")
    parser.add_argument("--json", help="for `all`: write the figures here too")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.what == "load":
        name, directory = args.args
        print(json.dumps(load_and_run(name, Path(directory), args.sizes, args.layers, device)), flush=True)
        return 0
    if args.what == "build":
        directory, build = Path(args.args[0]), args.args[1]
        directory.mkdir(parents=True, exist_ok=True)
        seconds = build_one(decoder(args.sizes, args.layers, device), directory, build)
        log.info("built %s in %.1f s", package_path(directory, build), seconds)
        return 0
    figures = run_all(Path(args.args[0]), args.sizes, args.layers, args.variants.split(","), device)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if figures["passed"] else 1


if __name__ == "__main__":
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    # Leave without native exit handlers: a process that loaded AOTInductor packages may hang or crash at exit
    # (tests/aoti_process.py says when), after its figures are printed.
    os._exit(code)
