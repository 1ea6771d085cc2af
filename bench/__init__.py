"""Evaluation and benchmarks, by purpose (the data sets themselves are ragmend.corpora):
- harness/: the evaluation harness (methods, workspace, records, the paper's tables, targets);
- suites/: the suites that write a report (paper, poison, ragtruth, the NLI suite);
- calibration/: thresholds fitted on DEV splits (diagnosis, KG alignment);
- speed/: speed benchmarks (pipeline, startup, load, policy, knowledge graph);
- markdown.py (the one markdown-table writer of every report) and stats.py, shared by all.
"""
