"""Tempo inside engines that run past one machine: an lmms-eval model (`lmms`, extra `tempo[lmms]`) and a Ray
engine for `tempo batch` (`ray_batch`, extra `tempo[ray]`). Neither engine is imported until it is used, so
`import tempo` never needs them."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import TempoError

# What each extra cannot pull in by itself: lmms-eval's own requirements bring ~150 packages and a torchvision built
# for CUDA torch, which breaks `import tempo` on the CPU build, so lmms-eval goes in without its dependencies.
INSTALL = {
    "lmms": 'pip install "tempo[lmms]" && pip install --no-deps lmms-eval==0.7.3',
    "ray": 'pip install "tempo[ray]"',
}


class MissingExtra(TempoError, ImportError):
    """An optional engine is not installed; the message says which extra brings it."""


def missing_extra(extra: str, cause: ImportError) -> MissingExtra:
    """The error for an engine that did not import, naming the install command of its extra."""
    return MissingExtra(f"This needs the {extra!r} extra ({cause.name or cause} is not installed): {INSTALL[extra]}")


def require(module: str, extra: str) -> ModuleType:
    """`module`, imported now; a `MissingExtra` naming `extra` if it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(extra, exc) from exc


def lmms_manifest() -> object:
    """lmms-eval's entry point (group `lmms_eval.models`): `--model tempo` is `tempo.integrations.lmms.Tempo`."""
    from lmms_eval.models.registry_v2 import ModelManifest  # lmms-eval is importing its models when it calls this

    return ModelManifest(model_id="tempo", simple_class_path="tempo.integrations.lmms.Tempo")
