"""Evaluation and benchmarks, by purpose (the data sets themselves are ragmend.corpora):
- harness/: the evaluation harness (methods, workspace, records, the paper's tables, targets);
- suites/: the suites that write a report (paper, poison, ragtruth, the NLI suite);
- calibration/: thresholds fitted on DEV splits (diagnosis, KG alignment);
- speed/: speed benchmarks (pipeline, startup, load, policy, knowledge graph);
- stats.py: small statistics shared by all.
"""
