"""Offline training recipes: ragmend's own NLI model (issue 3) and, later, the policy warm start.

nli_pairs.py builds in-domain NLI pairs from the DEV splits of HotpotQA and FEVER: the kind of
premise/hypothesis the diagnosis will judge (Wikipedia passages against claims and answer
sentences), with contradictions made by swapping a named entity (spaCy NER).
"""
