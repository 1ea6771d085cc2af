"""The cost meter's NVML and torch-CUDA paths on a real NVIDIA GPU (actions/meter.py).

These run only where NVML finds a device and torch runs on CUDA (a lent GPU machine:
`pytest --noconftest tests/test_meter_gpu.py`, docs/repair.md); everywhere else they are skipped
with NVML's own reason, and the fallback (RSS, labelled so) is tested in tests/test_actions.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from ragmend.actions.meter import CostMeter

GIB = 2**30
METER = CostMeter(interval_s=0.002)

pytestmark = pytest.mark.skipif(not METER.nvml_available, reason=f"no NVIDIA GPU: NVML {METER.nvml_status}")


@pytest.fixture(scope="module")
def torch_cuda() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("NVML sees a GPU but torch does not run on CUDA")
    torch.zeros(1, device="cuda")  # the CUDA context (hundreds of MB) is made before any pass
    torch.cuda.synchronize()
    return torch


def test_a_pass_that_holds_a_gib_on_the_device_costs_a_gib(torch_cuda: Any) -> None:
    torch = torch_cuda
    with METER.measure() as m:
        block = torch.ones(GIB, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        time.sleep(0.05)  # several sampler periods while the block is held
        del block
        torch.cuda.empty_cache()  # given back to the device: NVML's "after" falls again
        torch.cuda.synchronize()
    cost = m.cost
    assert cost is not None
    assert cost.memory_source == "nvml" and cost.nvml == "available"
    assert cost.device_used_before is not None and cost.device_peak is not None
    assert cost.device_used_after is not None
    # The sampled peak holds the block; by the end it was returned.
    assert cost.memory_bytes is not None and GIB <= cost.memory_bytes < 2 * GIB
    assert cost.device_peak - cost.device_used_after >= 0.9 * GIB
    # torch's own count: this process's tensors only, the block and nothing of the context.
    assert cost.torch_cuda_peak_bytes is not None and GIB <= cost.torch_cuda_peak_bytes < 1.1 * GIB


def test_a_pass_that_allocates_nothing_costs_about_nothing(torch_cuda: Any) -> None:
    with METER.measure() as m:
        time.sleep(0.02)
    cost = m.cost
    assert cost is not None and cost.memory_source == "nvml"
    assert cost.memory_bytes is not None and cost.memory_bytes < 64 * 2**20
    assert cost.torch_cuda_peak_bytes == 0
