"""The app as a ZeroGPU Space runs it, on this CPU (`python tests/zerogpu_app.py PORT`, for tests/test_zerogpu.py).

The real `spaces` package runs its GPU path: every `spaces.GPU` call asks the device API at
$SPACES_ZERO_DEVICE_API_URL for a GPU (the test serves one), then runs in a forked worker that gets its arguments
pickled and sends its results back pickled, with a memory of its own. Only the CUDA side of `spaces` is stubbed,
as there is no GPU here. Prints the app's URL, serves until stdin closes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import types


def stub_cuda() -> None:
    """`spaces.zero.torch` without CUDA: moving the model's tensors to and from a GPU does nothing."""
    stub = types.ModuleType("spaces.zero.torch")
    for name in ("patch", "unpatch", "init", "move", "enter_mode"):
        setattr(stub, name, lambda *args, **kwargs: None)
    stub.pack = stub.size = lambda *args, **kwargs: 0
    stub.is_in_bad_fork = lambda: False
    sys.modules["spaces.zero.torch"] = stub


if __name__ == "__main__":
    stub_cuda()
    import spaces  # noqa: F401  (first, as app.py does)

    from demo.launch import load_model, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the URL only; Gradio announces MCP even when quiet
        app = serve(load_model(), server_name="127.0.0.1", server_port=int(sys.argv[1]), prevent_thread_lock=True,
                    quiet=True)
    print(app.local_url.rstrip("/"), flush=True)
    while os.read(0, 1024):  # not sys.stdin: a worker forked while this thread held its lock could not start
        pass
    app.close()
