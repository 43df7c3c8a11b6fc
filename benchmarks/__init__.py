"""The benchmark suite of ontoos-explore: `python -m benchmarks.run` (see README.md)."""
