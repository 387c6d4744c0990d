"""Tempo-Tiny, the embedded default model: its recipe and curriculum on the synthetic long-video world, and its
evaluation on unseen videos."""
