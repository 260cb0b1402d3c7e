"""Metrics as JSON lines, written as they come, that survive an interrupted run.

On resume from a checkpoint taken after update ``step``, lines logged for
later updates are dropped (they will be logged again, identically, since the
run restarts from the same state); everything before stays.
"""
from __future__ import annotations

import json
import math
from pathlib import Path


def _clean(value):
    """JSON has no NaN/inf: write them as null. Floats keep 7 significant digits (float32 precision)."""
    if isinstance(value, float):
        return float(f"{value:.7g}") if math.isfinite(value) else None
    return value


class Logbook:
    def __init__(self, path: Path, resume_after: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_after is None:
            self.path.write_text("")
        elif self.path.exists():
            kept = [line for line in self.path.read_text().splitlines()
                    if line.strip() and json.loads(line).get("step", -1) <= resume_after]
            self.path.write_text("".join(line + "\n" for line in kept))

    def write(self, record: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")

    def read(self) -> list[dict]:
        return read_jsonl(self.path)


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
