"""llama.cpp's CPU libraries (ragmend/models/cpu_variant.py): which build a host may use, and, end
to end through `ragmend bench generator`, which one a process really loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragmend.cli.main import app
from ragmend.models import cpu_variant
from ragmend.models.cpu_variant import REQUIRED_FLAGS, STAMP, VARIANT, cpu_flags, usable_dir, variant_dir

runner = CliRunner()


def test_the_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(info) == frozenset({"fpu", "avx2", "avx512f"})
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_a_build_is_used_only_on_a_cpu_that_has_its_instructions_and_for_its_version(tmp_path: Path) -> None:
    every = frozenset(REQUIRED_FLAGS)
    where, why = usable_dir(tmp_path, every - {"avx512_vnni"})
    assert where is None and "lacks avx512_vnni" in why
    where, why = usable_dir(tmp_path, every)
    assert where is None and "make install" in why  # nothing built here
    version = cpu_variant.llama_version()
    assert version is not None
    built = variant_dir(tmp_path, version)
    built.mkdir(parents=True)
    (built / STAMP).write_text("0.0.1\n")  # another llama-cpp-python's libraries
    assert usable_dir(tmp_path, every)[0] is None
    (built / STAMP).write_text(version + "\n")
    assert usable_dir(tmp_path, every)[0] == built


@pytest.mark.generator  # loads the tiny GGUF, in two processes of its own
def test_bench_generator_reports_which_libraries_each_process_loaded(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["--profile", "tiny", "bench", "generator", "--cpu-variants", "portable,auto", "--threads", "1/1",
         "--prompt-tokens", "16", "--decode", "2", "--repeats", "1", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["variants"]["portable"]["loaded"] == "portable"
    from ragmend.settings import load_settings

    usable, _ = usable_dir(load_settings().cache_dir)
    assert out["variants"]["auto"]["loaded"] == (VARIANT if usable is not None else "portable")
    assert {r["cpu_variant"] for r in out["runs"]} == {"portable", "auto"}
    assert all(r["prefill_tokens_per_s"] > 0 and r["decode_tokens_per_s"] > 0 for r in out["runs"])
