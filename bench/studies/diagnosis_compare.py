"""Two diagnosis snapshots (bench/studies/diagnosis_snapshot.py) compared case by case: how many cases are
identical, how many differ, and for the first differing ones the JSON paths that differ.

    ragmend study diagnosis-compare BEFORE.jsonl AFTER.jsonl [--ignore KEY ...] [--show N] [--common-only]

Cases are matched by (set, id); a case in one file only counts as differing. Values are compared
as their JSON is written (1 and 1.0, or true and 1, differ; NaN equals NaN). Keys given with
--ignore are dropped at any depth from both sides first (meant for fields a refactor adds). Exit
code 0 when every case is identical, 1 otherwise (2: a file cannot be read); with --common-only,
cases in one file only are reported but do not count (a run of a part against the whole).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Key = tuple[str, str]


@dataclass(kw_only=True)
class Comparison:
    identical: int = 0
    # (set, id) and the differing paths of each differing case, in the BEFORE file's order.
    differing: list[tuple[Key, list[str]]] = field(default_factory=list)
    only_before: list[Key] = field(default_factory=list)
    only_after: list[Key] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # "<file>: set/id" seen more than once

    @property
    def all_identical(self) -> bool:
        return not (self.differing or self.only_before or self.only_after or self.duplicates)

    @property
    def common_identical(self) -> bool:
        """Every case both files hold is identical (one may be a part of the other)."""
        return not (self.differing or self.duplicates)


def without(value: Any, ignore: Collection[str]) -> Any:
    """`value` with every mapping key in `ignore` dropped, at any depth."""
    if isinstance(value, dict):
        return {k: without(v, ignore) for k, v in value.items() if k not in ignore}
    if isinstance(value, list):
        return [without(v, ignore) for v in value]
    return value


def _same_leaf(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def differences(a: Any, b: Any, path: str = "") -> Iterator[str]:
    """The JSON paths where `a` and `b` differ (`.key`, `[n]`; a missing side is named)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(a.keys() | b.keys()):
            where = f"{path}.{k}"
            if k not in b:
                yield f"{where} (only in before)"
            elif k not in a:
                yield f"{where} (only in after)"
            else:
                yield from differences(a[k], b[k], where)
    elif isinstance(a, list) and isinstance(b, list):
        for n, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from differences(x, y, f"{path}[{n}]")
        if len(a) != len(b):
            yield f"{path} (length {len(a)} before, {len(b)} after)"
    elif not _same_leaf(a, b):
        yield f"{path or '.'}: {_short(a)} -> {_short(b)}"


def _short(value: Any, width: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def read_snapshot(path: Path, duplicates: list[str]) -> dict[Key, Any]:
    rows: dict[Key, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        key = (str(row["set"]), str(row["id"]))
        if key in rows:
            duplicates.append(f"{path}: {key[0]}/{key[1]}")
        rows[key] = row
    return rows


def compare(before: Path, after: Path, ignore: Collection[str] = ()) -> Comparison:
    result = Comparison()
    a_rows = read_snapshot(before, result.duplicates)
    b_rows = read_snapshot(after, result.duplicates)
    for key, a in a_rows.items():
        if key not in b_rows:
            result.only_before.append(key)
            continue
        paths = list(differences(without(a, ignore), without(b_rows[key], ignore)))
        if paths:
            result.differing.append((key, paths))
        else:
            result.identical += 1
    result.only_after = [k for k in b_rows if k not in a_rows]
    return result


def _pattern(path: str) -> str:
    """A difference's path with list indices and values generalised, to count them across cases."""
    return re.sub(r"\[\d+\]", "[*]", path.split(":", 1)[0])


def report(result: Comparison, show: int = 5, paths_per_case: int = 20) -> str:
    lines = [
        f"identical: {result.identical}",
        f"differing: {len(result.differing) + len(result.only_before) + len(result.only_after)}"
        f" ({len(result.differing)} changed, {len(result.only_before)} only in before,"
        f" {len(result.only_after)} only in after)",
    ]
    lines += [f"duplicate case: {d}" for d in result.duplicates]
    for (set_name, case_id), paths in result.differing[:show]:
        lines.append(f"- {set_name}/{case_id}: {len(paths)} paths differ")
        lines += [f"    {p}" for p in paths[:paths_per_case]]
        if len(paths) > paths_per_case:
            lines.append(f"    ... {len(paths) - paths_per_case} more")
    for label, keys in (("only in before", result.only_before), ("only in after", result.only_after)):
        if keys:
            shown = ", ".join(f"{s}/{i}" for s, i in keys[:show])
            lines.append(f"{label}: {shown}{' ...' if len(keys) > show else ''}")
    if result.differing:
        counts = Counter(p for _, paths in result.differing for p in {_pattern(x) for x in paths})
        lines.append("paths that differ, by how many cases:")
        lines += [f"    {n:6d}  {p}" for p, n in counts.most_common(30)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--ignore", action="append", default=[], metavar="KEY", help="drop KEY at any depth")
    ap.add_argument("--show", type=int, default=5, help="differing cases to list (default 5)")
    ap.add_argument(
        "--common-only",
        action="store_true",
        help="judge only the cases both files hold (AFTER a part of BEFORE, e.g. a --limit run)",
    )
    args = ap.parse_args(argv)
    try:
        result = compare(args.before, args.after, set(args.ignore))
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(report(result, args.show))
    return 0 if (result.common_identical if args.common_only else result.all_identical) else 1
