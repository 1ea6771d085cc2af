"""The evaluation's targets for one task (what each row must reach against the others), checked
from the records, and the evidence of what limits a miss.

Targets: the better D2R policy beats Naive RAG, Query Paraphrase and Context Expansion on
the headline metric; its mean latency is at most 1.6x Naive RAG's; its lift over Naive RAG is at
least the paper's own best D2R lift; at least 300 test items. Each comparison is paired over the
same items with a 95% bootstrap interval (bench/harness/report.paired_lift).

Where D2R falls short, two things can limit it: the diagnosis (a wrong first answer that is never
flagged cannot be repaired; a right one that is flagged can be broken) and the generator (a flagged
answer that stays wrong after the repair). `diagnosis_evidence` counts both from the records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragmend.bench.harness.methods import METHODS_BY_NAME
from ragmend.bench.harness.report import paired_lift
from ragmend.bench.markdown import markdown_table
from ragmend.corpora.tasks import Task

D2R_POLICIES = ("d2r_linucb", "d2r_ts", "d2r_lints")
BASELINES = ("naive", "paraphrase", "expansion")
MAX_LATENCY_RATIO = 1.6
MIN_ITEMS = 300

Records = Mapping[str, Sequence[Mapping[str, Any]]]


def paper_lift(task: Task) -> float | None:
    """The paper's best D2R policy minus its Naive RAG on the headline metric (Table 1)."""
    naive = METHODS_BY_NAME["naive"].paper.get(task.name, {}).get(task.primary)
    d2r = [
        v
        for m in D2R_POLICIES
        if (v := METHODS_BY_NAME[m].paper.get(task.name, {}).get(task.primary)) is not None
    ]
    return round(max(d2r) - naive, 2) if naive is not None and d2r else None


def _ok(record: Mapping[str, Any], task: Task) -> bool:
    return record["scores"][task.primary] > 0


def _flagged(record: Mapping[str, Any]) -> bool:
    return record["first_failure"] not in (None, "NoFailure")


def _holding(records: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(items whose final passages held the gold answer, items where that is known)."""
    known = [r["answer_in_evidence"] for r in records if r.get("answer_in_evidence") is not None]
    return sum(known), len(known)


def diagnosis_evidence(
    task: Task, naive: Sequence[Mapping[str, Any]], d2r: Sequence[Mapping[str, Any]]
) -> dict:
    """How the D2R run's diagnosis and repairs treated the items Naive RAG got wrong and right."""
    first_ok = {r["id"]: _ok(r, task) for r in naive}
    rows = [(first_ok[r["id"]], r) for r in d2r if r["id"] in first_ok]
    wrong = [r for ok, r in rows if not ok]
    right = [r for ok, r in rows if ok]

    wrong_flagged = [r for r in wrong if _flagged(r)]
    right_flagged = [r for r in right if _flagged(r)]
    stuck = [r for r in wrong_flagged if not _ok(r, task)]
    return {
        # The generator's share: wrong although the passages it read held the answer.
        "naive_wrong_answer_in_evidence": _holding([r for r in naive if not first_ok[r["id"]]]),
        "flagged_still_wrong": len(stuck),
        "flagged_still_wrong_answer_in_evidence": _holding(stuck),
        "naive_wrong": len(wrong),
        "wrong_flagged": len(wrong_flagged),  # the diagnosis' recall of wrong answers
        "wrong_flagged_fixed": len(wrong_flagged) - len(stuck),
        "wrong_unflagged": len(wrong) - len(wrong_flagged),  # out of the repair's reach
        "naive_right": len(right),
        "right_flagged": len(right_flagged),  # false alarms
        "right_flagged_broken": sum(not _ok(r, task) for r in right_flagged),
    }


def baseline_wins(
    task: Task, base: Sequence[Mapping[str, Any]], d2r: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The items a baseline answered right and D2R wrong: was D2R's diagnosis even looking there?"""
    d2r_by_id = {r["id"]: r for r in d2r}
    pairs = [(b, d2r_by_id[b["id"]]) for b in base if b["id"] in d2r_by_id]
    wins = [(b, d) for b, d in pairs if _ok(b, task) and not _ok(d, task)]
    return {
        "wins": len(wins),  # baseline right, D2R wrong
        "losses": sum(not _ok(b, task) and _ok(d, task) for b, d in pairs),  # the other way
        "wins_flagged": sum(_flagged(d) for _, d in wins),
        "wins_answer_in_evidence": _holding([b for b, _ in wins]),
    }


def _baseline_lines(result: Mapping[str, Any]) -> list[str]:
    lines = []
    for base, w in result.get("baselines", {}).items():
        if not w["wins"]:
            continue
        held, known = w["wins_answer_in_evidence"]
        title = METHODS_BY_NAME[base].title
        text = (
            f"Where {title} wins: it answered {w['wins']} items right that D2R got wrong "
            f"(and {w['losses']} the other way); D2R's diagnosis had flagged {w['wins_flagged']} of "
            f"those {w['wins']}, so {w['wins'] - w['wins_flagged']} were out of every repair's reach"
        )
        if known:
            text += f"; {title}'s passages held the gold answer in {held} of {known} checkable"
        lines += ["", text + "."]
    return lines


def _generator_share(d: Mapping[str, Any]) -> list[str]:
    held, known = d.get("naive_wrong_answer_in_evidence", (0, 0))
    stuck_held, stuck_known = d.get("flagged_still_wrong_answer_in_evidence", (0, 0))
    if not known:
        return []
    text = (
        f"The generator's share, measured: of Naive RAG's wrong answers whose gold answer can be "
        f"looked for in text ({known}; yes/no answers cannot), the passages the generator read held "
        f"the gold answer in {held} ({100 * held / known:.0f}%): retrieval had found it, the "
        "generator did not give it."
    )
    if stuck_known:
        text += (
            f" Of the flagged answers still wrong after the repair ({stuck_known} checkable), the "
            f"repaired passages held the answer in {stuck_held} ({100 * stuck_held / stuck_known:.0f}%)."
        )
    return ["", text]


def check_targets(
    task: Task, summary: Mapping[str, Mapping[str, Any]], records: Records, seed: int = 0
) -> dict:
    ran = [m for m in D2R_POLICIES if summary.get(m, {}).get("n")]
    if not ran or "naive" not in records:
        return {}
    best = max(ran, key=lambda m: summary[m][task.primary])
    out: dict[str, Any] = {"best_d2r": best, "metric": task.primary, "checks": []}
    lifts: dict[str, Any] = {}
    for base in BASELINES:
        if base not in records:
            out["checks"].append(
                {"target": f"beats {METHODS_BY_NAME[base].title}", "met": None, "note": "not run yet"}
            )
            continue
        lift = lifts[base] = paired_lift(task, records[base], records[best], seed)
        out["checks"].append(
            {
                "target": f"beats {METHODS_BY_NAME[base].title}",
                "met": bool(lift and lift["lift"] > 0),
                **(lift or {}),
            }
        )
    ratio = summary[best]["latency_s"] / summary["naive"]["latency_s"]
    out["checks"].append(
        {
            "target": f"latency <= {MAX_LATENCY_RATIO}x Naive RAG",
            "met": ratio <= MAX_LATENCY_RATIO,
            "value": round(ratio, 3),
        }
    )
    want = paper_lift(task)
    lift = lifts["naive"]  # the same paired comparison as "beats Naive RAG"
    if want is not None and lift is not None:
        out["checks"].append(
            {
                "target": f"lift over Naive RAG >= the paper's (+{want})",
                "met": lift["lift"] >= want,
                "value": lift["lift"],
                "short_by": round(max(0.0, want - lift["lift"]), 2),
            }
        )
    n = min(summary[m]["n"] for m in (best, *BASELINES) if summary.get(m, {}).get("n"))
    out["checks"].append({"target": f">= {MIN_ITEMS} test items", "met": n >= MIN_ITEMS, "value": n})
    out["diagnosis"] = diagnosis_evidence(task, records["naive"], records[best])
    # For each baseline D2R does not beat: the items it wins, and whether the diagnosis saw them.
    out["baselines"] = {
        base: baseline_wins(task, records[base], records[best])
        for base in BASELINES
        if base != "naive" and base in lifts and lifts[base] and lifts[base]["lift"] <= 0
    }
    return out


def targets_markdown(task: Task, result: Mapping[str, Any]) -> list[str]:
    if not result:
        return []
    best = METHODS_BY_NAME[result["best_d2r"]].title
    lines = [
        "### Targets",
        "",
        f"The better D2R policy here: {best} (by {result['metric']}). Paired over the same test items.",
        "",
    ]
    rows = []
    for c in result["checks"]:
        met = {True: "yes", False: "**no**", None: "-"}[c["met"]]
        if c["met"] and c.get("ci95_low", 1) <= 0:
            met = "yes, not significant (CI includes 0)"
        if "lift" in c:
            fig = f"{c['lift']:+.2f} points [{c['ci95_low']:+.2f}, {c['ci95_high']:+.2f}]"
        elif "short_by" in c:
            fig = f"{c['value']:+.2f} points" + (f" (short by {c['short_by']:.2f})" if c["short_by"] else "")
        else:
            fig = str(c.get("value", c.get("note", "")))
        rows.append([c["target"], met, fig])
    lines += markdown_table(["target", "met", "figure"], rows)
    d = result["diagnosis"]
    if d["naive_wrong"]:
        lines += [
            "",
            f"What limits the lift ({best}'s run against Naive RAG's answers on the same items): of the "
            f"{d['naive_wrong']} items Naive RAG answered wrong, the diagnosis flagged "
            f"{d['wrong_flagged']} ({100 * d['wrong_flagged'] / d['naive_wrong']:.0f}%); "
            f"the repair fixed {d['wrong_flagged_fixed']} of those; {d['wrong_unflagged']} were never "
            "flagged, so no repair could reach them (the diagnosis' recall; docs/diagnosis.md, "
            '"Figures", measures it against answer correctness). '
            f"Of the {d['naive_right']} right answers, {d['right_flagged']} were flagged (false alarms) "
            f"and {d['right_flagged_broken']} of those ended wrong. Flagged wrong answers that stayed "
            "wrong after one repair are the generator's share of the limit.",
        ]
        lines += _generator_share(d)
    lines += _baseline_lines(result)
    return [*lines, ""]


# The first pass's targets (the router): ragmend against Naive RAG, the fixed plans and the
# cascade. Per task: the least lift over Naive RAG with its 95% CI above 0, how close to the most
# accurate fixed plan, and the latency ratios allowed.
ROUTER_LIFT = {"hotpotqa": 8.0, "fever": 5.0}
ROUTER_LATENCY_RATIO = {"fever": 1.5}
WITHIN_BEST_PLAN = {"hotpotqa": 1.0}
RAGMEND = "ragmend"


def _plans(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [m for m in summary if m.startswith("plan_") and summary[m].get("n")]


def router_targets(
    task: Task, summary: Mapping[str, Mapping[str, Any]], records: Records, seed: int = 0
) -> list[dict[str, Any]]:
    """The router's targets that apply to `task`, each with its figure (ragmend's row against
    the rows run beside it; none when ragmend has not run)."""
    if RAGMEND not in records or not summary.get(RAGMEND, {}).get("n"):
        return []
    ours = summary[RAGMEND]
    metric = task.primary
    checks: list[dict[str, Any]] = []
    if "naive" in records and (want := ROUTER_LIFT.get(task.name)) is not None:
        lift = paired_lift(task, records["naive"], records[RAGMEND], seed) or {}
        met = bool(lift) and lift["lift"] >= want and lift["ci95_low"] > 0
        checks.append({"target": f">= +{want:g} over Naive RAG, 95% CI above 0", "met": met, **lift})
    if "naive" in summary and (ratio := ROUTER_LATENCY_RATIO.get(task.name)) is not None:
        value = ours["latency_s"] / summary["naive"]["latency_s"]
        checks.append(
            {"target": f"latency <= {ratio:g}x Naive RAG", "met": value <= ratio, "value": round(value, 3)}
        )
    plans = _plans(summary)
    if plans and (within := WITHIN_BEST_PLAN.get(task.name)) is not None:
        best = max(plans, key=lambda m: summary[m][metric])
        gap = summary[best][metric] - ours[metric]
        checks.append(
            {
                "target": f"within {within:g} of the most accurate fixed plan ({best})",
                "met": gap <= within,
                "value": round(-gap, 2),
            }
        )
        slower = ours["latency_s"] - summary[best]["latency_s"]
        checks.append(
            {
                "target": f"mean latency no more than {best}'s",
                "met": slower <= 0,
                "value": f"{ours['latency_s']:.2f} s against {summary[best]['latency_s']:.2f} s",
            }
        )
    if task.name == "mixed":
        rivals = [*plans, *(["cascade"] if summary.get("cascade", {}).get("n") else [])]
        if rivals and "mean_reward" in ours:
            top = max(rivals, key=lambda m: summary[m].get("mean_reward", -1.0))
            theirs = summary[top].get("mean_reward", 0.0)
            checks.append(
                {
                    "target": "mean reward above every fixed plan's and the cascade's",
                    "met": ours["mean_reward"] > theirs,
                    "value": f"{ours['mean_reward']:.4f} against {theirs:.4f} ({top})",
                }
            )
        dominating = [
            m
            for m in plans
            if summary[m][metric] > ours[metric] and summary[m]["latency_s"] < ours["latency_s"]
        ]
        checks.append(
            {
                "target": "no fixed plan both more accurate and faster",
                "met": not dominating,
                "value": ", ".join(dominating) or "none",
            }
        )
    n = min(summary[m]["n"] for m in (RAGMEND, "naive", *plans) if summary.get(m, {}).get("n"))
    checks.append({"target": f">= {MIN_ITEMS} test items per row", "met": n >= MIN_ITEMS, "value": n})
    return checks


def router_targets_markdown(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    if not checks:
        return []
    rows = []
    for c in checks:
        met = {True: "yes", False: "**no**"}[bool(c["met"])]
        if "lift" in c:
            fig = f"{c['lift']:+.2f} points [{c['ci95_low']:+.2f}, {c['ci95_high']:+.2f}]"
        else:
            fig = str(c.get("value", ""))
        rows.append([c["target"], met, fig])
    return [
        "### Targets of the first pass (ragmend)",
        "",
        *markdown_table(["target", "met", "figure"], rows),
        "",
    ]
