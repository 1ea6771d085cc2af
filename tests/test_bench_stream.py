"""`ragmend bench stream`'s arithmetic: the first pass's stages read from the server's report, and
the per-mode figures (rates, the hardware limit) computed from them."""

from __future__ import annotations

import pytest

from ragmend.bench.speed.stream import _stages, summarize
from ragmend.errors import InputError


def _report(kept: str | None) -> dict:
    return {
        "usage": {"by_purpose": {"answer": {"prompt_tokens": 300, "completion_tokens": 21}}},
        "timings": {"retrieve_s": 0.05, "rerank_s": 0.0, "generate_s": 6.0, "first_token_s": 4.0},
        "diagnosis": {"timings": {"nli": 0.2, "kg": 0.1}},
        "first_diagnosis": {"timings": {"nli": 0.3}} if kept else None,
        "repair": {"action": "rerank", "kept": kept} if kept else None,
        "seconds": 7.0,
    }


def test_an_unrepaired_request_reports_its_stages() -> None:
    s = _stages(_report(None))
    assert s["prompt_tokens"] == 300 and s["generator_first_token_s"] == 4.0
    assert s["retrieve_s"] == pytest.approx(0.05)
    assert s["diagnose_s"] == pytest.approx(0.3)
    assert s["repaired"] is False


def test_a_repaired_reply_does_not_pass_the_second_pass_off_as_the_first() -> None:
    s = _stages(_report("repaired"))
    assert s["repaired"] is True
    assert s["generate_s"] is None and s["generator_first_token_s"] is None
    assert s["prompt_tokens"] == 300  # the first pass's, from usage
    assert s["diagnose_s"] == pytest.approx(0.3)  # the first answer's diagnosis


def test_rates_and_the_hardware_limit() -> None:
    request = {"status": 200, "ttft_s": 4.5, "first_answer_s": 6.5, "total_s": 7.0} | _stages(_report(None))
    out = summarize([request], prefill_rate=75.0)
    assert out["ttft_p50_s"] == 4.5 and out["first_answer_p50_s"] == 6.5
    assert out["prefill_tokens_per_s_p50"] == pytest.approx(300 / 4.0, abs=1e-3)
    assert out["decode_tokens_per_s_p50"] == pytest.approx(20 / 2.0, abs=1e-3)
    # ttft against prompt tokens / rate + retrieval: 4.5 / (4.0 + 0.05)
    assert out["ttft_vs_limit_p50"] == pytest.approx(4.5 / 4.05, abs=1e-3)
    assert out["total_unrepaired_p50_s"] == 7.0


def test_failed_requests_are_counted_not_measured() -> None:
    out = summarize([{"status": 503, "ttft_s": None, "total_s": 0.1}])
    assert out == {"ok": 0, "errors": 1}


def test_more_requests_than_distinct_questions_is_refused() -> None:
    from ragmend.bench.speed.stream import run_stream_bench

    with pytest.raises(InputError, match="none asked twice"):
        run_stream_bench(None, {}, requests=1000, url="http://127.0.0.1:9")
