"""Train NLI mixes on a lent GPU machine (`device`), which holds torch and transformers but
neither the shared data nor the server's dependencies, and carries at most 64 MiB per call.

    python scripts/nli_gpu.py pack --mix train/mixes/minilm-long.yaml --out .gpu   # here
    python scripts/nli_gpu.py run --dir .gpu --out "$OUT"                          # there

`pack` resolves each mix exactly as `ragmend nli train` does (resolve_mix: the same pairs in the
same order, so the same held-out split and training order) and writes them with the training
configuration, the base model in float16 (half the size; `run` turns it back into float32 before
training) and the NLI suite's TEST sets for a first reading there. `run` trains each mix with
`train_nli` (the trainer of `ragmend nli train`), scores it on those sets, and writes the first
mix's weights in float16 parts under 16 MiB (what the machine sends back); `join` rebuilds a
transformers model directory from them here, for `ragmend nli export`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragmend.corpora.readers import NLI_LABELS, NLIPair, load_nli  # noqa: E402
from ragmend.train.nli_train import TrainConfig, load_train_config, resolve_mix, train_nli  # noqa: E402

PART_BYTES = 15 * 2**20
CHUNK = "::rows"
EVAL_SETS = (
    "long_premise_test",
    "mnli_dev_matched",
    "snli_test",
    "fever_claim_evidence_test",
    "hotpot_statement_test",
    "swap_within_test",
)


def pack(mixes: list[Path], out: Path, data_root: Path) -> None:
    from safetensors.torch import load_file, save_file

    from ragmend.bench.suites.nli import SUITE
    from ragmend.train.nli_train import base_path

    out.mkdir(parents=True, exist_ok=True)
    bases = set()
    for mix in mixes:
        cfg = load_train_config(mix)
        pairs = resolve_mix(cfg, data_root, ROOT)
        _write_pairs(out / f"{mix.stem}.pairs.jsonl.gz", pairs)
        (out / f"{mix.stem}.config.json").write_text(json.dumps(dataclasses.asdict(cfg), default=str))
        bases.add(base_path(cfg.base, allow_hub=False, scratch=out / "dequantized"))
        print(f"{mix.stem}: {len(pairs)} pairs")
    # `run` trains the mixes in the order given here and sends the first one's weights back.
    (out / "order.json").write_text(json.dumps([m.stem for m in mixes]))
    if len(bases) != 1:
        raise SystemExit(f"the mixes name {len(bases)} bases; pack carries one")
    base = Path(bases.pop())
    (out / "base").mkdir(exist_ok=True)
    for f in base.iterdir():
        if f.suffix == ".safetensors":
            save_file({k: v.half().contiguous() for k, v in load_file(f).items()}, out / "base" / f.name)
        elif f.is_file() and f.suffix in {".json", ".txt"}:
            (out / "base" / f.name).write_bytes(f.read_bytes())
    sets = {s.name: s for s in SUITE}
    for name in EVAL_SETS:
        _write_pairs(out / "eval" / f"{name}.jsonl.gz", sets[name].load(data_root))


def run(pack_dir: Path, out: Path, deadline_s: float, device: str = "cuda", limit: int | None = None) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    base32 = Path("/tmp/nli-base32")
    base32.mkdir(exist_ok=True)
    for f in (pack_dir / "base").iterdir():
        if f.suffix == ".safetensors":
            save_file({k: v.float().contiguous() for k, v in load_file(f).items()}, base32 / f.name)
        else:
            (base32 / f.name).write_bytes(f.read_bytes())
    eval_files = sorted((pack_dir / "eval").glob("*.gz"))
    evals = {p.name.removesuffix(".jsonl.gz"): _read_pairs(p) for p in eval_files}
    if limit:  # a dry run of the whole path on a few pairs
        evals = {k: v[:limit] for k, v in evals.items()}
    where = torch.cuda.get_device_name(0) if device.startswith("cuda") else device
    results: dict[str, object] = {"device": where, "torch": torch.__version__}
    per_pair = 0.0
    for n, name in enumerate(json.loads((pack_dir / "order.json").read_text())):
        cfg_path = pack_dir / f"{name}.config.json"
        pairs = _read_pairs(pack_dir / f"{name}.pairs.jsonl.gz")[:limit]
        # A mix starts only if, at the last mix's pace per pair, it ends before the deadline.
        expected = per_pair * len(pairs)
        if time.perf_counter() - t0 + expected > deadline_s:
            results[name] = {"skipped": f"{expected:.0f} s expected, past the {deadline_s:.0f} s deadline"}
            (out / "results.json").write_text(json.dumps(results, indent=1))
            continue
        started = time.perf_counter()
        raw = json.loads(cfg_path.read_text())
        raw["mix"] = tuple()
        cfg = dataclasses.replace(TrainConfig(**raw), base=str(base32))
        trained = train_nli(cfg, pairs, Path(f"/tmp/nli-{name}"), device=device, progress=_progress(name))
        model_dir = Path(trained["model"])
        if n == 0:  # the weights first: what an evaluation cut short by the call's limit leaves
            _write_parts(model_dir, out)
        scores = {k: _evaluate(model_dir, v, device) for k, v in evals.items()}
        results[name] = {"train": trained, "eval": scores}
        per_pair = 1.1 * (time.perf_counter() - started) / len(pairs)
        print(json.dumps({name: results[name]}, indent=1), flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))


def _progress(name: str) -> Callable[[int, int, float], None]:
    t0 = time.perf_counter()

    def report(step: int, total: int, loss: float) -> None:
        if step % 1000 == 0 or step == total:
            print(f"{name}: step {step}/{total} loss {loss:.3f} {time.perf_counter() - t0:.0f} s", flush=True)

    return report


def join(parts_dir: Path, pack_dir: Path, out: Path) -> None:
    """A transformers model directory from `run`'s parts and the pack's tokenizer and config."""
    import torch
    from safetensors.torch import load, save_file

    loaded: dict[str, torch.Tensor] = {}
    for part in sorted(parts_dir.glob("weights.part*.safetensors")):
        loaded |= {k: v.float() for k, v in load(part.read_bytes()).items()}
    tensors: dict[str, torch.Tensor] = {}
    for key in sorted(loaded):
        name = key.split(CHUNK)[0]
        tensors[name] = torch.cat([tensors[name], loaded[key]]) if name in tensors else loaded[key]
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    for f in (pack_dir / "base").iterdir():
        if f.suffix != ".safetensors":
            (out / f.name).write_bytes(f.read_bytes())
    (out / "config.json").write_bytes((parts_dir / "config.json").read_bytes())


def _evaluate(model_dir: Path, pairs: list[NLIPair], device: str) -> dict[str, object]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ragmend.bench.harness.nli_eval import classification_metrics

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).to(device).eval()
    pred: list[str] = []
    with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        for i in range(0, len(pairs), 256):
            batch = pairs[i : i + 256]
            enc = tok(
                [p.premise for p in batch],
                [p.hypothesis for p in batch],
                truncation="only_first",
                max_length=256,
                padding=True,
                return_tensors="pt",
            ).to(device)
            pred += [NLI_LABELS[j] for j in model(**enc).logits.argmax(-1).tolist()]
    metrics = classification_metrics([p.label for p in pairs], pred)
    return {k: metrics[k] for k in ("n", "accuracy", "macro_f1", "false_entailment_rate", "confusion")}


def _write_parts(model_dir: Path, out: Path) -> None:
    from safetensors.torch import load_file, save

    tensors = {}
    for k, v in load_file(model_dir / "model.safetensors").items():
        v = v.half().contiguous()
        rows = max(1, PART_BYTES // max(1, v[0].numel() * 2)) if v.dim() else 1
        if v.numel() * 2 <= PART_BYTES:
            tensors[k] = v
        else:  # the word embeddings alone are over a part: cut by rows, `join` concatenates
            for i, start in enumerate(range(0, v.shape[0], rows)):
                tensors[f"{k}{CHUNK}{i:03d}"] = v[start : start + rows].contiguous()
    part: dict[str, object] = {}
    size, n = 0, 0
    for key in sorted(tensors):
        nbytes = tensors[key].numel() * 2
        if part and size + nbytes > PART_BYTES:
            (out / f"weights.part{n}.safetensors").write_bytes(save(part))  # type: ignore[arg-type]
            part, size, n = {}, 0, n + 1
        part[key], size = tensors[key], size + nbytes
    (out / f"weights.part{n}.safetensors").write_bytes(save(part))  # type: ignore[arg-type]
    (out / "config.json").write_bytes((model_dir / "config.json").read_bytes())


def _write_pairs(path: Path, pairs: list[NLIPair]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p.as_json(), ensure_ascii=False) + "\n")


def _read_pairs(path: Path) -> list[NLIPair]:
    plain = Path("/tmp") / path.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    return load_nli(plain)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--mix", type=Path, action="append", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    r = sub.add_parser("run")
    r.add_argument("--dir", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument(
        "--deadline", type=float, default=300.0, help="seconds by which the last mix must end (else skipped)"
    )
    r.add_argument("--device", default="cuda")
    r.add_argument("--limit", type=int, help="pairs per mix and set: a dry run")
    j = sub.add_parser("join")
    j.add_argument("--parts", type=Path, required=True)
    j.add_argument("--dir", type=Path, required=True)
    j.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.mix, a.out, a.data_root)
    elif a.cmd == "run":
        run(a.dir, a.out, a.deadline, a.device, a.limit)
    else:
        join(a.parts, a.dir, a.out)


if __name__ == "__main__":
    main()
