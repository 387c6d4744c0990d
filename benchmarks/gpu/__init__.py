"""The GPU check's modules (`benchmarks/gpu/check` runs `python -m benchmarks.gpu.measure`)."""
