"""The tests that load AOTInductor packages, each in a process of its own (for tests/test_gpu_check.py and
tests/test_compiled_decoding.py).

Why a process of its own: once decord is loaded (it is, with RTLD_GLOBAL, wherever a test read a video with it) and
then AOTInductor packages are, that process double-freed or hung at exit in decord's copy of the C++ thread-exit
handler (torch 2.13, CPU), after every test had passed. So these runs leave with os._exit, as the GPU check does.

    python -m tests.aoti_process fault NAME OUT [--only PARTS]
                                                   the GPU check's dry run with a fault planted (NAME: vision,
                                                   decoding or compiled); exits with the check's code
    python -m tests.aoti_process tiny DIR          Tempo-Tiny's layer step built into DIR and run against the eager
                                                   forward, and the package offered to the fixture model: DIR/tiny.json
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick() -> None:
    """The dry run builds one package, probes one way of loading it and leaves the cold call and the loader's
    diagnosis out (the full dry run covers both), so that a planted fault costs two builds."""
    from dataclasses import replace

    from benchmarks.gpu import aoti_env, compiled, measure

    compiled.COMPILED = ("split",)
    measure.cold = lambda *args: {}
    aoti_env.diagnose = lambda *args, **kwargs: {"cause": "not diagnosed in a planted-fault run", "remedy": "none"}
    measure.DRY_RUN = replace(measure.DRY_RUN, loader=("tiny", 2, ("once",), 1))


def plant(fault: str) -> None:
    """A vision tower that raises; a step that attends to nothing; compiled layers whose output is perturbed (as a
    miscompiled kernel's would be)."""
    import torch

    from tempo.model import static_decoding
    from tempo.model.compiled_decoding import CompiledLayers
    from tempo.model.compressor import LocalCompressor

    if fault == "vision":
        def encode_vision(self, pixel_values, grids):
            raise RuntimeError("vision tower broken on purpose")
        LocalCompressor.encode_vision = encode_vision
    elif fault == "decoding":
        static_decoding.attend = lambda q, keys, values, visible, scale, how: torch.zeros_like(q)
    elif fault == "compiled":
        generator = torch.Generator().manual_seed(0)

        def perturbed(self):
            for run in self.runners:
                yield lambda *tensors, run=run: run(*tensors) + 0.05 * torch.randn(tensors[0].shape,
                                                                                    generator=generator)
        CompiledLayers.__iter__ = perturbed
    else:
        raise SystemExit(f"no fault {fault!r}")


def tiny(directory: Path) -> dict:
    """Tempo-Tiny's layer step (split-KV attention) built, loaded onto every layer of its decoder and teacher-forced
    for 24 steps over a 500-position prefill against the eager forward; then offered to the fixture model's decoder."""
    import torch

    import tempo
    from tempo.model.compiled_decoding import CompiledLayers, build
    from tempo.model.static_decoding import StaticDecoding

    model = tempo.from_pretrained(device="cpu")
    decoder = model.decoder
    package = directory / "decoder-layer-flash.pt2"
    started = time.perf_counter()
    build(decoder.lm, package, "flash")
    figures: dict = {"build_s": round(time.perf_counter() - started, 1), "package_bytes": package.stat().st_size}
    layers = CompiledLayers(package, decoder.lm)
    embeds = torch.randn(500, decoder.lm.config.hidden_size, generator=torch.Generator().manual_seed(0)) * 0.5
    tokens = torch.randint(0, 200, (24,), generator=torch.Generator().manual_seed(2)).tolist()
    with torch.inference_mode():
        _, cache = decoder.prefill(embeds)
        eager = torch.stack([decoder.lm(input_ids=torch.tensor([[token]]), use_cache=True,
                                        **{decoder.cache_argument: cache}).logits[0, -1] for token in tokens])
        _, cache = decoder.prefill(embeds)
        steps = StaticDecoding(decoder.lm, [layer.keys for layer in cache.layers],
                               [layer.values for layer in cache.layers], len(tokens), graph=False, layers=layers)
        compiled = torch.stack([steps.step(token) for token in tokens])
    first_layer = decoder.lm.model.layers[0]
    figures.update(layers=len(layers), model_layers=len(decoder.lm.model.layers), attention=layers.attention,
                   capacity=steps.capacity,
                   max_difference=(eager - compiled).abs().max().item(),
                   same_argmax=torch.equal(eager.argmax(-1), compiled.argmax(-1)),
                   layer_weight_bytes=sum(p.numel() * p.element_size() for p in first_layer.parameters()))
    fixtures = ROOT / "tests" / "fixtures" / "conformance"
    other = tempo.from_pretrained(fixtures / "tempo", base=fixtures / "base" / "tiny-qwen3-vl", device="cpu")
    try:
        CompiledLayers(package, other.decoder.lm)
        figures["refused"] = None
    except ValueError as exc:
        figures["refused"] = str(exc)
    return figures


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO)
    if argv[0] == "fault":
        from benchmarks.gpu import measure

        quick()
        plant(argv[1])
        return measure.main(["--dry-run", "--out", argv[2], *argv[3:]])
    directory = Path(argv[1])
    (directory / "tiny.json").write_text(json.dumps(tiny(directory)))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
