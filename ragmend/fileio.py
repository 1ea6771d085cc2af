"""Atomic file writes: the text goes to a temporary file beside the target, is flushed to disk,
then renamed over it, so a crash leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide shipped files from other users
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_write_json(path: Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def archive_dir(parent: Path) -> Path:
    """A new parent/archive/<UTC time>/ to move earlier results into: nothing is deleted, an
    earlier result stays readable next to the new one."""
    aside = parent / "archive" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside.mkdir(parents=True, exist_ok=True)
    return aside


def archive_file(records: Path) -> Path | None:
    """Move a records file into `archive_dir` beside it; None when there is none."""
    if not records.exists():
        return None
    return Path(shutil.move(records, archive_dir(records.parent) / records.name))
