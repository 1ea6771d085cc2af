"""Repair actions as patches of the frozen RAGConfig, their masking, the cost meter (with the
honest no-GPU path on this machine), and the engine services actions call (real models)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmend.actions.catalogue import ACTIONS, ACTIONS_BY_NAME, Cooldown, CostModel, feasible
from ragmend.actions.meter import CostMeter
from ragmend.budgets import Budgets
from ragmend.engine import Engine
from ragmend.engine.services import EngineServices, clean_rewrite
from ragmend.models.registry import ModelRegistry
from ragmend.rag.types import RAGConfig
from tests.conftest import tiny_settings


class RecordingServices:
    """Stands in for the engine where an action's patch is checked on its own (no model call)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def rewrite_query(self, query: str, variant: str) -> str:
        self.calls.append((variant, query))
        return f"{variant}: {query}"

    def refresh_index(self) -> str:
        self.calls.append(("refresh", ""))
        return "gen-000002"


P = RAGConfig()


def test_each_action_is_a_patch_of_the_config() -> None:
    s = RecordingServices()
    assert ACTIONS_BY_NAME["rewrite_paraphrase"].apply(P, "who?", s).query == "paraphrase: who?"
    assert ACTIONS_BY_NAME["rewrite_simplify"].apply(P.patch(query="q2"), "who?", s).query == "simplify: q2"
    rr = ACTIONS_BY_NAME["rerank"].apply(P, "q", s)
    assert rr.rerank and rr.k == 20 and rr.rerank_top_n == P.k
    assert ACTIONS_BY_NAME["depth"].apply(P, "q", s).k == 10
    assert ACTIONS_BY_NAME["depth"].apply(P.patch(k=10), "q", s).k == 20
    assert ACTIONS_BY_NAME["mode_switch"].apply(P, "q", s).mode == "bm25"
    assert ACTIONS_BY_NAME["mode_switch"].apply(P.patch(mode="bm25"), "q", s).mode == "dense"
    assert ACTIONS_BY_NAME["index_refresh"].apply(P, "q", s) == P and s.calls[-1] == ("refresh", "")
    focused = ACTIONS_BY_NAME["focus"].apply(P, "q", s)
    assert focused.evidence == "focus" and focused.hops == 1 and focused.k == P.k
    hops = ACTIONS_BY_NAME["decompose"].apply(P, "q", s)
    assert hops.hops == 2 and hops.evidence == "focus"
    assert RAGConfig() == P  # the original is never mutated
    # abstain, present_conflict and no_repair run no pass: there is no configuration to patch.
    assert {a.name for a in ACTIONS if not a.runs_a_pass} == {"abstain", "present_conflict", "no_repair"}
    with pytest.raises(AssertionError):
        ACTIONS_BY_NAME["abstain"].apply(P, "q", s)


def test_an_action_is_a_pass_with_a_patch_or_a_decision_without_one() -> None:
    from ragmend.actions.catalogue import Action

    with pytest.raises(ValueError, match="needs a patch"):
        Action(name="x", does="nothing", prior_latency_s=0.0, prior_memory_bytes=0)
    with pytest.raises(ValueError, match="needs a patch"):
        Action(
            name="y",
            does="nothing",
            prior_latency_s=0.0,
            prior_memory_bytes=0,
            patch=ACTIONS_BY_NAME["focus"].patch,
            effect="keep",
        )


def test_masking_by_applicability_budget_and_cooldown_never_by_failure() -> None:
    names = [a.name for a in ACTIONS]
    costs = CostModel()
    big = Budgets(latency_s=100.0, memory_bytes=1e9)
    # Which action helps which failure is the policy's to learn: with room, every action that
    # would change the configuration is offered.
    ok, masked = feasible(P, big, costs, names)
    assert {a.name for a in ok} == set(names) and masked == []
    ok, masked = feasible(P.patch(rerank=True, k=20, evidence="focus", hops=2), big, costs, names)
    unchanged = {m.name for m in masked if m.reason == "would not change the configuration"}
    assert unchanged == {"rerank", "depth", "focus", "decompose"}
    ok, masked = feasible(P, big, costs, names, refresh_allowed=False)
    assert "index_refresh" not in {a.name for a in ok}
    # The first pass took 4 s: with 5 s left only actions expected under 5 s fit; the ones that
    # run no pass cost no pass.
    ok, masked = feasible(P, Budgets(5.0, 1e9), costs, names, base_pass_s=4.0)
    assert {a.name for a in ok} == {
        "rewrite_simplify",
        "rerank",
        "mode_switch",
        "focus",
        "decompose",
        "present_conflict",
        "abstain",
        "no_repair",
    }
    ok, _ = feasible(P, Budgets(100.0, 1 << 20), costs, names)
    assert "rerank" not in {a.name for a in ok}  # its 2 MB prior does not fit 1 MB
    cd = Cooldown(3600)
    assert cd.ready()
    cd.mark()
    assert not cd.ready()


def test_cost_model_learns_from_measurements_and_a_slow_pass_does_not_price_an_action_out() -> None:
    costs = CostModel(window=5, forget_after=3)
    a = ACTIONS_BY_NAME["depth"]
    assert costs.expected(a, base_pass_s=2.0) == (2.0 + a.prior_latency_s, float(a.prior_memory_bytes))
    # Overheads over the first pass each repeated: 2 s and 0 s; the memory measured once.
    costs.observe("depth", 4.0, None, base_pass_s=2.0)
    costs.observe("depth", 3.0, 1000, base_pass_s=3.0)
    lat, mem = costs.expected(a, base_pass_s=2.0)
    assert lat == pytest.approx(3.0) and mem == 1000.0  # 2 s + the median overhead, 1 s
    # One pass slowed by something else (30 s over) moves the median, not the estimate's scale.
    costs.observe("depth", 32.0, None, base_pass_s=2.0)
    assert costs.expected(a, base_pass_s=2.0)[0] == pytest.approx(4.0)
    # An action masked for its cost again and again forgets its measurements and is tried again.
    for _ in range(3):
        costs.observe("depth", 60.0, None, base_pass_s=2.0)
    assert costs.expected(a, base_pass_s=2.0)[0] == pytest.approx(60.0)
    tight = Budgets(latency_s=10.0, memory_bytes=1e9)
    for _ in range(3):
        ok, masked = feasible(P, tight, costs, ["depth"], base_pass_s=2.0)
        assert not ok and "expected" in masked[0].reason
    ok, _ = feasible(P, tight, costs, ["depth"], base_pass_s=2.0)
    assert [x.name for x in ok] == ["depth"]  # back to its prior: 2 s + 1.5 s


def test_meter_says_no_gpu_and_falls_back_to_rss() -> None:
    meter = CostMeter()
    with meter.measure() as m:
        block = bytearray(64 << 20)  # touch 64 MB so the resident set grows
        block[::4096] = b"x" * len(block[::4096])
    cost = m.cost
    assert cost is not None and cost.latency_s > 0
    if meter.nvml_available:  # a machine with an NVIDIA GPU: NVML is used, never RSS
        assert cost.memory_source == "nvml" and cost.device_used_before is not None
    else:
        assert meter.nvml_status.startswith("unavailable")
        assert cost.memory_source == "rss" and cost.device_peak is None
        assert cost.memory_bytes is not None and cost.memory_bytes >= 32 << 20
    del block


class FakeNvmlNoRealGPU:
    """A stand-in for the pynvml module on a machine with no GPU: scripted device memory readings,
    to check the peak sampling logic. Real NVML runs only where a GPU is lent (docs/repair.md)."""

    class _Info:
        def __init__(self, used: int) -> None:
            self.used = used

    def __init__(self, readings: list[int]) -> None:
        self.readings = readings
        self.i = 0

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"gpu{i}"

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> _Info:
        value = self.readings[min(self.i, len(self.readings) - 1)]
        self.i += 1
        return self._Info(value)


def test_meter_nvml_path_takes_the_peak_over_the_pass() -> None:
    import time

    fake = FakeNvmlNoRealGPU([1000, 1500, 9000, 1200])  # before, samples..., the last repeats
    meter = CostMeter(nvml=fake, interval_s=0.001)
    assert meter.nvml_available
    with meter.measure() as m:
        time.sleep(0.05)
    c = m.cost
    assert c is not None and c.memory_source == "nvml" and c.nvml == "available"
    assert c.device_used_before == 1000 and c.device_peak == 9000 and c.memory_bytes == 8000
    broken = FakeNvmlNoRealGPU([0])
    broken.nvmlDeviceGetCount = lambda: 0  # type: ignore[method-assign]
    meter = CostMeter(nvml=broken)
    assert not meter.nvml_available and "device 0 asked for, 0 present" in meter.nvml_status


def test_clean_rewrite() -> None:
    assert clean_rewrite('Rewritten query: "Who founded Marvel?"\nExtra', "q") == "Who founded Marvel?"
    assert clean_rewrite("", "orig") == "orig"
    assert clean_rewrite("x" * 500, "short query") == "short query"


@pytest.mark.generator
def test_engine_services_rewrite_and_refresh(tmp_path: Path, registry: ModelRegistry) -> None:
    src = tmp_path / "docs.jsonl"
    src.write_text(json.dumps({"id": "a", "title": "A", "text": "Alpha is the first letter."}) + "\n")
    settings = tiny_settings(tmp_path / "data", sources=[str(src)])
    eng = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    eng.load(roles=("embeddings",))
    services = EngineServices(eng)
    rewritten = services.rewrite_query("Which letter comes first in the Greek alphabet?", "simplify")
    assert rewritten.strip() and len(rewritten) < 400
    held = eng.corpus.index.snapshot  # a request in flight keeps this snapshot
    with src.open("a") as f:
        f.write(json.dumps({"id": "b", "title": "B", "text": "Beta is the second letter."}) + "\n")
    new_gen = services.refresh_index()
    assert new_gen != held.generation and eng.corpus.index.snapshot.generation == new_gen
    assert len(held.nodes) == 1 and len(eng.corpus.index.snapshot.nodes) == 2


def test_the_repair_page_lists_every_action_of_the_catalogue() -> None:
    """docs/repair.md's table of actions is written from actions/catalogue.py: a new action, or a
    changed description or prior, shows there, or this fails."""
    from ragmend.actions.reference import markdown, with_table

    page = Path(__file__).resolve().parent.parent / "docs" / "repair.md"
    text = page.read_text(encoding="utf-8")
    assert with_table(text) == text, "run python -m ragmend.actions.reference docs/repair.md"
    assert all(f"| {a.name} | {a.does} |" in markdown() for a in ACTIONS_BY_NAME.values())
