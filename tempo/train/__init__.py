"""Training Tempo-Tiny, the embedded default model, on the synthetic long-video world."""
