"""Cost metering of a repair pass: latency on a monotonic clock, and memory.

Memory, in order of preference:
  nvml        NVIDIA device memory through pynvml: used before, after, and the peak seen by a
              sampler thread (every `interval_s`); the cost is peak - before.
  torch_cuda  reported beside NVML when torch runs on CUDA: torch.cuda.max_memory_allocated over
              the pass (reset at its start), which sees this process's tensors only.
  rss         no NVIDIA GPU (or NVML cannot start): the growth of this process's resident set
              (peak sampled - before), labelled as such. It is host memory, not accelerator
              memory, and says so in `Cost.memory_source`; the reason NVML is unavailable is kept.
Never an invented number: where nothing can be read, memory_bytes is None.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from ragmend import clock

MemorySource = Literal["nvml", "rss", "unavailable"]


@dataclass(frozen=True, kw_only=True)
class Cost:
    latency_s: float
    memory_bytes: int | None  # peak growth during the pass; None when nothing could be read
    memory_source: MemorySource
    nvml: str  # "available" or "unavailable: <why>"
    device_used_before: int | None = None  # NVML: device memory used, bytes
    device_used_after: int | None = None
    device_peak: int | None = None
    torch_cuda_peak_bytes: int | None = None  # torch.cuda.max_memory_allocated during the pass
    # Of latency_s, the recorded duration of generations served from the cache (ragmend.clock).
    replayed_s: float = 0.0
    # Of latency_s, the waits for the cores other requests' work held (an in-process generation's
    # turn, a retrieval's or a diagnosis' turn): the server's load, which every plan waits
    # through alike.
    waited_s: float = 0.0

    @property
    def service_s(self) -> float:
        """What the pass itself took: its latency less its waits for the cores others held."""
        return max(0.0, self.latency_s - self.waited_s)


@dataclass
class _Probe:
    """Where memory readings come from: a callable returning bytes in use, and what it is."""

    read: Callable[[], int]
    source: MemorySource


def read_rss_bytes() -> int:
    """Resident set size of this process (Linux /proc); raises OSError where there is none."""
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


class CostMeter:
    """Measures one pass at a time per `measure()` call; safe to share between threads (each
    measurement has its own sampler). NVML is initialised once, lazily."""

    def __init__(
        self,
        device_index: int = 0,
        interval_s: float = 0.005,
        nvml: Any | None = None,
        waited: Callable[[], float] | None = None,
    ):
        # `nvml` is the pynvml module (or a stand-in with its interface, in tests on machines
        # without a GPU); None imports pynvml. `waited`: the calling thread's seconds so far of
        # waiting for the cores other requests' work held (ModelRegistry.cores_waited_s); what a
        # measured block adds to it is the cost's `waited_s`.
        self.waited = waited
        self.device_index = device_index
        self.interval_s = interval_s
        self._nvml_module = nvml
        self._lock = threading.Lock()
        self._handle: Any = None
        self._nvml_status: str | None = None

    @property
    def nvml_status(self) -> str:
        self._init_nvml()
        assert self._nvml_status is not None
        return self._nvml_status

    @property
    def nvml_available(self) -> bool:
        return self.nvml_status == "available"

    def _init_nvml(self) -> None:
        with self._lock:
            if self._nvml_status is not None:
                return
            try:
                nvml = self._nvml_module
                if nvml is None:
                    import pynvml  # optional at run time: imported only when metering starts

                    nvml = pynvml
                nvml.nvmlInit()
                count = nvml.nvmlDeviceGetCount()
                if self.device_index >= count:
                    raise RuntimeError(f"device {self.device_index} asked for, {count} present")
                self._handle = nvml.nvmlDeviceGetHandleByIndex(self.device_index)
                self._nvml_module = nvml
                self._nvml_status = "available"
            except Exception as e:  # pynvml raises NVMLError_* subclasses per failure (no driver, ...)
                self._nvml_status = f"unavailable: {type(e).__name__}: {e}".rstrip(": ")

    @property
    def memory_source(self) -> MemorySource:
        """What `measure()` will read memory from on this machine."""
        probe = self._probe()
        return probe.source if probe is not None else "unavailable"

    def _probe(self) -> _Probe | None:
        if self.nvml_available:
            nvml, handle = self._nvml_module, self._handle
            assert nvml is not None  # nvml_available: _init_nvml kept the module
            return _Probe(lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).used), "nvml")
        try:
            read_rss_bytes()
        except (OSError, ValueError):
            return None
        return _Probe(read_rss_bytes, "rss")

    @contextmanager
    def measure(self) -> Iterator[_Measurement]:
        probe = self._probe()
        m = _Measurement(probe=probe, interval_s=self.interval_s, nvml=self.nvml_status, waited=self.waited)
        m.start()
        try:
            yield m
        finally:
            m.stop()


@dataclass(kw_only=True)
class _Measurement:
    probe: _Probe | None
    interval_s: float
    nvml: str
    waited: Callable[[], float] | None = None
    cost: Cost | None = None
    _t0: float = 0.0
    _waited0: float = 0.0
    _before: int | None = None
    _peak: int | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _torch: Any = None

    def start(self) -> None:
        self._torch = _torch_cuda()
        if self._torch is not None:
            self._torch.cuda.reset_peak_memory_stats()
        if self.probe is not None:
            self._before = self._peak = self.probe.read()
            self._thread = threading.Thread(target=self._sample, name="ragmend-cost-sampler", daemon=True)
            self._thread.start()
        self._t0 = clock.now()
        self._replayed0 = clock.replayed()
        self._waited0 = self.waited() if self.waited is not None else 0.0

    def _sample(self) -> None:
        assert self.probe is not None
        while not self._stop.wait(self.interval_s):
            value = self.probe.read()
            if self._peak is None or value > self._peak:
                self._peak = value

    def stop(self) -> None:
        latency = clock.now() - self._t0
        replayed = clock.replayed() - self._replayed0
        waited = self.waited() - self._waited0 if self.waited is not None else 0.0
        after: int | None = None
        if self.probe is not None:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            after = self.probe.read()
            self._peak = max(self._peak or after, after)
        torch_peak = int(self._torch.cuda.max_memory_allocated()) if self._torch is not None else None
        growth = None
        if self.probe is not None and self._before is not None and self._peak is not None:
            growth = max(0, self._peak - self._before)
        nvml = self.probe is not None and self.probe.source == "nvml"
        self.cost = Cost(
            latency_s=latency,
            memory_bytes=growth,
            memory_source=self.probe.source if self.probe is not None else "unavailable",
            nvml=self.nvml,
            device_used_before=self._before if nvml else None,
            device_used_after=after if nvml else None,
            device_peak=self._peak if nvml else None,
            torch_cuda_peak_bytes=torch_peak,
            replayed_s=replayed,
            waited_s=waited,
        )


def _torch_cuda() -> Any:
    """torch, when it is already imported and runs on CUDA; never imports torch itself."""
    import sys

    torch = sys.modules.get("torch")
    try:
        return torch if torch is not None and torch.cuda.is_available() else None
    except Exception:  # a broken CUDA install must not break metering
        return None
