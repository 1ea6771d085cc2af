"""Evaluation and benchmarks: datasets with the fixed dev/test splits, and `ragmend bench ...`."""
