"""Handlers return named updates; `connect` puts them in the order of an event's outputs and refuses a name the
event does not output, so a misspelt one fails loudly instead of vanishing."""

from __future__ import annotations

import gradio as gr
import pytest

from demo.layout import connect


def test_named_updates_become_values_in_the_outputs_order_and_unknown_names_are_refused():
    with gr.Blocks():
        outputs = {"status": gr.HTML(), "chat": gr.Chatbot()}

    def handler(server, which):
        return {"chat": ["hi"], "status": "ok"} if which == "good" else {"statsu": "typo"}

    fn = connect(handler, server=None, outputs=outputs)
    assert fn("good") == ["ok", ["hi"]]
    with pytest.raises(KeyError, match="statsu"):
        fn("bad")
