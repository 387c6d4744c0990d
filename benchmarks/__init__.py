"""Timing and load scripts, each run from the repository root as `python -m benchmarks.NAME` (its docstring gives
the options); `benchmarks/gpu/check` runs the GPU check. Their recorded figures are in `benchmarks/results/`."""
