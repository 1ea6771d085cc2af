"""The shared data sets (../shared/data) and what is derived from them, below training and evaluation.

Both train/ (NLI training, the policy warm start) and bench/ (evaluation, benchmarks) read the data
through this part, and it imports neither of them:
- readers.py: one loader per format (HotpotQA, FEVER, SufficientFacts, the NLI sets and their
  licenses), JSONL in and out, and the one dev / test split rule;
- tasks.py: each evaluation data set as one value (items, corpus, prompt, scoring), `first`;
- scoring.py: answer normalisation, EM / F1, the FEVER label of a claim-mode response;
- nli_pairs.py: in-domain NLI pairs built from the DEV splits (and the entity swapper).

(Not named `datasets`: a top-level folder of that name would shadow Hugging Face's `datasets`
package whenever the checkout is on sys.path, as it is under pytest and `python -m`.)
"""
