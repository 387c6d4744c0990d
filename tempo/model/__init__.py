"""The model: the local compressor and the global decoder of one checkpoint, their prompts and tokenizers, and the
released checkpoint format they load from."""

from .checkpoint_files import DEFAULT_MODEL
from .loading import CheckpointSpec
from .modeling import TempoModel, build_model, from_pretrained, save_pretrained

__all__ = ["DEFAULT_MODEL", "CheckpointSpec", "TempoModel", "build_model", "from_pretrained", "save_pretrained"]
