"""The evaluation harness: every method over a task's items through the engine the server uses.

evaluate.py runs the methods (methods.py) in a workspace (workspace.py); report.py aggregates the
per-item records into the paper's tables and plots, targets.py checks the evaluation's targets
from them; nli_eval.py scores an NLI model on labelled pairs.
"""
