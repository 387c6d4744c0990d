"""Tempo on a Hugging Face Space: watch a small VLM compress a long video for a question, then answer.

`python app.py` serves the page (`demo/`) around the model $TEMPO_MODEL / $TEMPO_BASE names (a hub id or a
directory), else the embedded Tempo-Tiny. API endpoints for gradio_client: /answer (streamed JSON), /compare,
/sweep, /segment, /report and /analyze (what the page itself calls); each takes the video and the question, then
the settings (max_frames, budget, k_min, strategy, truncation, temperature, max_new_tokens).
"""

import spaces  # noqa: F401  (on ZeroGPU it must come before torch: it takes over CUDA set-up)

from demo.launch import main

if __name__ == "__main__":
    main()
