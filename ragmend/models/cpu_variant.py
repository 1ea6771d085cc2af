"""llama.cpp's CPU libraries: the portable build, or an AVX-512 build where the CPU has it.

The llama-cpp-python wheel is built portable (AVX2, no -march=native) so one cached wheel runs on
any x86-64 host. On a CPU with AVX-512 and VNNI the same GGUF's prompt evaluation is about 1.5x
as fast with libraries built for them (docs/benchmarks.md, "The generator: the machine's limit").
`make install` builds that second set of libraries, from the same llama-cpp-python version's
sources, into the cache (scripts/build_llama_variant.py) when this CPU can run it; the generator
loader points llama-cpp-python at it (its LLAMA_CPP_LIB_PATH) before llama_cpp is first imported.

The choice is per host, at load time, never baked into a wheel: a cache copied to a host without
AVX-512, or libraries of another llama-cpp-python version, are not used.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import sys
from pathlib import Path

from ragmend.settings import CpuVariant

log = logging.getLogger("ragmend.models")

VARIANT = "avx512-vnni"
# What the build is compiled for (scripts/build_llama_variant.py) and so what the CPU must have.
REQUIRED_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni")
# What the build is compiled for, as llama.cpp's CMake options.
CMAKE_OPTIONS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_AVX512=ON",
    "-DGGML_AVX512_VNNI=ON",
)
STAMP = "llama-cpp-python.version"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """This CPU's feature flags as Linux reports them (empty where /proc/cpuinfo is absent)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def missing_flags(flags: frozenset[str]) -> tuple[str, ...]:
    return tuple(f for f in REQUIRED_FLAGS if f not in flags)


def llama_version() -> str | None:
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return None


def variant_dir(cache_dir: Path, version: str) -> Path:
    """Where the AVX-512 libraries of llama-cpp-python `version` live."""
    return cache_dir / "llama-cpp" / f"{version}-{VARIANT}"


def usable_dir(cache_dir: Path, flags: frozenset[str] | None = None) -> tuple[Path | None, str]:
    """The AVX-512 libraries' folder if this host can use them, else None; and why, in words."""
    if sys.platform != "linux":
        return None, "the AVX-512 build is made on Linux only"
    lacking = missing_flags(cpu_flags() if flags is None else flags)
    if lacking:
        return None, f"this CPU lacks {', '.join(lacking)}"
    version = llama_version()
    if version is None:
        return None, "llama-cpp-python is not installed"
    where = variant_dir(cache_dir, version)
    stamp = where / STAMP
    if not stamp.is_file() or stamp.read_text(encoding="utf-8").strip() != version:
        return None, f"no {VARIANT} build of llama-cpp-python {version} in {where.parent} (make install)"
    return where, f"{VARIANT} build in {where}"


def select(choice: CpuVariant, cache_dir: Path) -> str:
    """Point llama-cpp-python at the AVX-512 libraries when `choice` is auto and the host can use
    them; returns which libraries the generator will load, in words. Only before llama_cpp is
    imported (its libraries load at import); an operator's own LLAMA_CPP_LIB_PATH always wins."""
    if "llama_cpp" in sys.modules:
        return "the libraries llama_cpp already loaded"
    if choice == "portable":
        return "portable build (models.generator.cpu_variant = portable)"
    where, why = usable_dir(cache_dir)
    if where is None:
        return f"portable build ({why})"
    os.environ.setdefault("LLAMA_CPP_LIB_PATH", str(where))
    return why


def loaded_cpu_library() -> str | None:
    """The path of the ggml CPU library this process mapped (Linux), to report what really runs."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.rsplit(" ", 1)[-1]
        if "libggml-cpu" in path:
            return path
    return None


def loaded_variant() -> str:
    """'avx512-vnni' or 'portable' from the mapped CPU library; 'unknown' where not seen."""
    path = loaded_cpu_library()
    if path is None:
        return "unknown"
    return VARIANT if f"-{VARIANT}" in path else "portable"
