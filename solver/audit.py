"""`cosine audit` and `cosine whatif`: read a run directory, never re-solve."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from solver.errors import InputError


def _load_run(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: not a run directory")
    log, sol = run_dir / "solver.log.jsonl", run_dir / "solution.json"
    if not log.is_file() or not sol.is_file():
        raise InputError(f"{run_dir}: missing solver.log.jsonl or solution.json (run `cosine solve` first)")
    recs = []
    for i, line in enumerate(log.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError:
            raise InputError(f"{log}:{i}: not a JSON record (the file is corrupt)") from None
    try:
        solution = json.loads(sol.read_text())
    except json.JSONDecodeError:
        raise InputError(f"{sol}: not valid JSON (the file is corrupt)") from None
    return recs, solution


@dataclass
class AuditRow:
    record: dict[str, Any]
    flags: list[str]


def audit(run_dir: Path, max_gap: float, max_approx_error: float) -> list[AuditRow]:
    """Flag bands whose certificate is missing or over the thresholds."""
    if max_gap < 0 or max_approx_error < 0 or math.isnan(max_gap) or math.isnan(max_approx_error):
        raise InputError("--max-gap and --max-approx-error must be non-negative numbers")
    recs, _ = _load_run(run_dir)
    rows = []
    for r in recs:
        flags = []
        if r.get("status") in ("optimal", "feasible"):
            g, a = r.get("mip_gap"), r.get("approx_error")
            if g is None or g > max_gap:
                flags.append(f"gap {g if g is None else f'{g:.2e}'} > {max_gap:g}")
            if a is None or a > max_approx_error:
                flags.append(f"approx error {a if a is None else f'{a:.2e}'} > {max_approx_error:g}")
            if r.get("status") == "feasible":
                flags.append("not proven optimal")
        elif r.get("status") not in ("infeasible",):
            flags.append(f"status {r.get('status')}")
        rows.append(AuditRow(r, flags))
    return rows


def frontier_rows(run_dir: Path) -> list[dict[str, Any]]:
    p = run_dir / "frontier.parquet"
    if not p.is_file():
        raise InputError(f"{run_dir}: no frontier.parquet (run `cosine solve` first)")
    try:
        return pq.ParquetFile(p).read().to_pylist()
    except Exception:
        raise InputError(f"{p}: not a readable parquet file (the file is corrupt)") from None


def whatif(run_dir: Path, budget: float | None, throughput: float | None) -> dict[str, Any]:
    """Answer from the saved frontier: best point within a budget, or the
    cheapest point reaching a throughput (across providers)."""
    if (budget is None) == (throughput is None):
        raise InputError("give exactly one of --budget or --throughput")
    for name, v in (("--budget", budget), ("--throughput", throughput)):
        if v is not None and (not math.isfinite(v) or v <= 0):
            raise InputError(f"{name} must be a positive number, got {v}")
    rows = [r for r in frontier_rows(run_dir) if r.get("throughput_ops")]
    if not rows:
        raise InputError(f"{run_dir}: the frontier has no feasible point")
    if budget is not None:
        ok = [r for r in rows if r["monthly_cost"] <= budget * (1 + 1e-9)]
        if not ok:
            cheapest = min(rows, key=lambda r: r["monthly_cost"])
            return {
                "query": {"budget": budget},
                "answer": None,
                "note": f"no saved configuration costs at most ${budget:,.2f}; the cheapest costs "
                f"${cheapest['monthly_cost']:,.2f}",
                "cheapest": cheapest,
            }
        best = max(ok, key=lambda r: (r["throughput_ops"], -r["monthly_cost"]))
    else:
        ok = [r for r in rows if r["throughput_ops"] >= throughput * (1 - 1e-9)]  # type: ignore[operator]
        if not ok:
            fastest = max(rows, key=lambda r: r["throughput_ops"])
            return {
                "query": {"throughput": throughput},
                "answer": None,
                "note": f"no saved configuration reaches {throughput:,.0f} ops/s; the fastest gives "
                f"{fastest['throughput_ops']:,.0f} ops/s for ${fastest['monthly_cost']:,.2f}",
                "fastest": fastest,
            }
        best = min(ok, key=lambda r: (r["monthly_cost"], -r["throughput_ops"]))
    best = dict(best)
    best["configuration"] = json.loads(best["configuration"]) if best.get("configuration") else {}
    by_provider: dict[str, dict[str, float]] = {}
    for r in ok:
        p = r["provider"]
        key = (
            (r["throughput_ops"], -r["monthly_cost"])
            if budget is not None
            else (-r["monthly_cost"], r["throughput_ops"])
        )
        cur = by_provider.get(p)
        cur_key = (
            None
            if cur is None
            else (
                (cur["throughput_ops"], -cur["monthly_cost"])
                if budget is not None
                else (-cur["monthly_cost"], cur["throughput_ops"])
            )
        )
        if cur_key is None or key > cur_key:
            by_provider[p] = {"throughput_ops": r["throughput_ops"], "monthly_cost": r["monthly_cost"]}
    return {"query": {"budget": budget, "throughput": throughput}, "answer": best, "per_provider": by_provider}
