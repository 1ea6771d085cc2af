"""AggregateNLI: passage-level probabilities -> one state per hypothesis -> one state per signal.

The rule (thresholds from configuration, calibrated on dev; docs/diagnosis.md):

  per hypothesis h, over the premises (each passage, plus the joint premise when enabled):
    entail      if some premise has P(entail | premise, h) >= tau_e (tau_joint: joint premise)
    contradict  else, if some premise has P(contradict | premise, h) >= tau_c
    neutral     otherwise
  per signal, over its hypotheses (one for the query; one per claim for the response):
    contradict  if any hypothesis is contradicted    (one false claim makes the answer wrong)
    entail      else, if every hypothesis is entailed (each claim needs support somewhere)
    neutral     otherwise

Entailment wins over contradiction within one hypothesis: retrieved sets often hold an outdated
or off-topic passage that "contradicts" what another states, and the answer is still supported.
That mix is reported separately as the evidence-conflict flag.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragmend.diagnosis.types import HypothesisVerdict, NLIState, PassageScores, Thresholds


def hypothesis_state(hypothesis: str, scores: Sequence[PassageScores], t: Thresholds) -> HypothesisVerdict:
    if scores:
        # The joint premise must clear its own, higher bar: two unrelated passages side by side
        # draw mid-range entailment that neither gives alone.
        entailing = [s for s in scores if s.entail >= (t.joint_entail if s.passage == "joint" else t.entail)]
        if entailing:
            # A passage that entails the hypothesis alone is named over the joint premise, even a
            # hair below it: the joint premise is for what no single passage supports, and naming
            # it cites every joined passage, an unrelated one included
            # (tests/test_diagnosis.py pins the case).
            single = [s for s in entailing if s.passage != "joint"]
            best_e = max(single or entailing, key=lambda s: s.entail)
            return HypothesisVerdict(
                hypothesis=hypothesis, state="entail", best_passage=best_e.passage, scores=tuple(scores)
            )
        best_c = max(scores, key=lambda s: s.contradict)
        if best_c.contradict >= t.contradict:
            return HypothesisVerdict(
                hypothesis=hypothesis, state="contradict", best_passage=best_c.passage, scores=tuple(scores)
            )
    return HypothesisVerdict(hypothesis=hypothesis, state="neutral", best_passage=None, scores=tuple(scores))


def signal_state(verdicts: Sequence[HypothesisVerdict]) -> NLIState:
    states = [v.state for v in verdicts]
    if not states:
        return "neutral"
    if "contradict" in states:
        return "contradict"
    if all(s == "entail" for s in states):
        return "entail"
    return "neutral"
