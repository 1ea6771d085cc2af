"""Offline training recipes: ragmend's own NLI model and the policy warm start.

nli_train.py trains on NLI pairs (the in-domain ones come from ragmend.corpora.nli_pairs: the kind
of premise/hypothesis the diagnosis will judge), nli_distill.py labels pairs with a teacher,
nli_export.py exports to ONNX, calibrate.py fits the softmax temperature; warm_start.py is
Algorithm 2, the live repair loop over a data set's DEV split (`ragmend train`).
"""
