"""Build llama.cpp's libraries for AVX-512 + VNNI CPUs into ragmend's cache, beside the portable
llama-cpp-python wheel (ragmend.models.cpu_variant says how the generator picks them).

    .venv/bin/python scripts/build_llama_variant.py [--force]

Run by `make install`. Does nothing (exit 0) where this CPU lacks the instructions, or where the
build of the installed llama-cpp-python version is already there. Otherwise: the same version's
source distribution from the package index, llama.cpp's libraries only (no tools, no server),
installed atomically (built in a temporary folder, renamed into place, the version stamped last).
A failed build leaves the portable libraries in use and exits 1 with the reason; `make install`
goes on without it. About 8 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ragmend.models.cpu_variant import (
    CMAKE_OPTIONS,
    STAMP,
    VARIANT,
    cpu_flags,
    llama_version,
    missing_flags,
    variant_dir,
)
from ragmend.settings import load_settings

LIBRARIES = ("libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu.so")


def run(cmd: list[str], log: Path) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise RuntimeError(f"{cmd[0]} {cmd[1]} failed (exit {done.returncode}):\n{tail}")


def build(version: str, dest: Path, jobs: int, cmake: str) -> None:
    with tempfile.TemporaryDirectory(prefix="ragmend-llama-") as tmp:
        work = Path(tmp)
        log = work / "build.log"
        run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"llama-cpp-python=={version}", "-d", str(work)],
            log,
        )  # fmt: skip
        sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        src = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
        out = work / "build"
        run(
            [cmake, "-S", str(src), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
             "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
             "-DCMAKE_INSTALL_RPATH=$ORIGIN", "-DLLAMA_BUILD_TESTS=OFF",
             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF",
             "-DLLAMA_CURL=OFF", *CMAKE_OPTIONS],
            log,
        )  # fmt: skip
        run([cmake, "--build", str(out), "--target", "llama", "-j", str(jobs)], log)
        staged = work / "staged"
        staged.mkdir()
        for name in LIBRARIES:
            found = sorted(out.rglob(f"{name}*"))
            if not found:
                raise RuntimeError(f"the build made no {name}")
            for path in found:  # the library and its versioned names (symlinks kept)
                shutil.copy2(path, staged / path.name, follow_symlinks=False)
        dest.parent.mkdir(parents=True, exist_ok=True)
        old = dest.with_name(dest.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if dest.exists():
            dest.rename(old)
        shutil.move(str(staged), dest)
        shutil.rmtree(old, ignore_errors=True)
        # Last: the stamp is what makes the folder count (cpu_variant.usable_dir).
        (dest / STAMP).write_text(version + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="build even if this version's build is there")
    ap.add_argument("--jobs", type=int, default=0, help="parallel compile jobs (0: every core)")
    args = ap.parse_args()
    lacking = missing_flags(cpu_flags())
    if lacking:
        print(f"llama.cpp {VARIANT} libraries: not built, this CPU lacks {', '.join(lacking)}")
        return 0
    version = llama_version()
    if version is None:
        print(f"llama.cpp {VARIANT} libraries: llama-cpp-python is not installed", file=sys.stderr)
        return 1
    dest = variant_dir(load_settings().cache_dir, version)
    stamp = dest / STAMP
    if not args.force and stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == version:
        print(f"llama.cpp {VARIANT} libraries: present in {dest}")
        return 0
    cmake = shutil.which("cmake") or shutil.which("cmake", path=str(Path(sys.executable).parent))
    if cmake is None:
        print(f"llama.cpp {VARIANT} libraries: not built, cmake is not installed", file=sys.stderr)
        return 1
    print(f"llama.cpp {VARIANT} libraries: building llama-cpp-python {version}'s into {dest} ...")
    try:
        build(version, dest, args.jobs or os.cpu_count() or 2, cmake)
    except (RuntimeError, OSError, StopIteration) as e:
        print(f"llama.cpp {VARIANT} libraries: build failed, the portable ones serve: {e}", file=sys.stderr)
        return 1
    print(f"llama.cpp {VARIANT} libraries: built in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
