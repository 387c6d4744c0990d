"""Byte-level BPE tokenizer with a hard line between prompt markup and text a user typed."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from ..errors import ModelError


class TextTokenizer:
    """Loads `tokenizer.json` as released; user text never turns into special tokens.

    `markup` parses special tokens (`<|im_start|>`, `<|video_pad|>`, ...) as the prompt templates need;
    `text` encodes the same characters as ordinary text, so a question containing `<|im_end|>` cannot
    close a turn or inject vision placeholders.
    """

    def __init__(self, path: str | os.PathLike):
        file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else os.fspath(path)
        if not os.path.isfile(file):
            raise ModelError(f"No tokenizer.json in {path}.")
        self._markup = Tokenizer.from_file(file)
        self._text = Tokenizer.from_file(file)
        self._text.encode_special_tokens = True

    def markup(self, prompt: str) -> list[int]:
        return self._markup.encode(prompt, add_special_tokens=False).ids

    def text(self, text: str) -> list[int]:
        return self._text.encode(text, add_special_tokens=False).ids

    def token_id(self, token: str) -> int:
        token_id = self._markup.token_to_id(token)
        if token_id is None:
            raise ModelError(f"The tokenizer has no single token {token!r}.")
        return token_id

    def decode(self, ids: Iterable[int]) -> str:
        return self._markup.decode(list(ids), skip_special_tokens=True)

    def has_letters(self, token_id: int) -> bool:
        """Whether a token spells part of a word (digits, spaces and punctuation do not)."""
        return any(c.isalpha() for c in self._markup.decode([token_id], skip_special_tokens=True))

    def piece_decoder(self) -> Callable[[int], str]:
        """Incremental decoding: the text each new token adds, never half of a multi-byte character."""
        stream = DecodeStream(skip_special_tokens=True)
        return lambda token_id: stream.step(self._markup, token_id) or ""
