"""`cosine report`: a run directory as one self-contained, offline what-if page.

The page (``report/templates/whatif.html``) shows the frontier per provider and
the presets' frontiers, a budget slider with the configuration ``cosine whatif
--budget --saved`` answers from the saved bands (design, bill, certificate, each provider's
best; ``cosine whatif`` without ``--saved`` re-solves any budget exactly), the
robust-vs-nominal comparison and the binding resource when solution.json has
them. Everything is in the one file: plotly.js is read from the ``plotly``
package and embedded, the run's data is embedded as JSON; nothing is fetched.
The slider does not re-implement whatif's rule: the answers are computed here
(:func:`solver.whatif.budget_steps`) for every budget step and the page only
looks up the step a budget falls in.
"""

from __future__ import annotations

from dataclasses import asdict
from importlib import resources
from pathlib import Path
from typing import Any

from report.plots import COLOURS, FRONTIER_PLOT, PRESET_STYLE, preset_frontier
from solver.rundir import BASELINES, FRONTIER, LOG, LOG_DIR, SOLUTION, Bill, load_run
from solver.whatif import budget_steps, row_dict
from specs.errors import InputError
from specs.io import check_not_an_input, check_output_file, to_json, to_record, write_text
from specs.vocab import CostModel

TEMPLATE = "whatif.html"
#: Markers the template holds where the script and the data go.
PLOTLY_MARK = "/*COSINE:PLOTLY*/"
DATA_MARK = "/*COSINE:DATA*/"
#: What the page is made from: the run's files (load_run), and its bands' logs; never its --out.
RUN_INPUTS = (SOLUTION, FRONTIER, BASELINES, LOG, LOG_DIR)
#: The matplotlib line styles of report/plots.py as plotly dash names.
_DASH = {"--": "dash", ":": "dot", "-.": "dashdot", "-": "solid"}


def plotly_js() -> str:
    """plotly.js as the ``plotly`` package ships it (no CDN)."""
    try:
        return (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise InputError(f"the plotly package (with its bundled plotly.min.js) is not installed: {exc}") from None


def page_data(run_dir: Path) -> dict[str, Any]:
    """Everything the page shows, read from the run directory (validated by load_run)."""
    run = load_run(run_dir, baselines=True)
    sol = run.solution
    log = {(r.band, str(r.provider)): r for r in run.log}
    rows = []
    for r in run.frontier:
        rec = log[(r.band, r.provider)]  # load_run checked that every row has its record
        rows.append({**row_dict(r), "backend": rec.backend, "method": rec.method})
    base = [{**asdict(b), "class": b.design_class} for b in run.baselines]
    presets = {
        p: {"colour": col, "dash": _DASH.get(ls, "solid"), "points": preset_frontier(base, p)}
        for p, (col, ls) in PRESET_STYLE.items()
    }
    steps = budget_steps(run.frontier)
    if not steps:
        raise InputError(f"{run_dir}: the frontier has no feasible point")
    budgets = [r.budget for r in run.frontier]
    return {
        "spec": sol.spec,
        "pricing": sol.pricing,
        "objective": sol.objective,
        "cost_model": str(sol.spec_raw.get("cost_model", CostModel.DISTRIBUTION_AWARE)),
        "spec_budget": sol.budget,
        "answer_at_spec_budget": {
            "provider": sol.provider,
            "vms": to_record(sol.vms),
            "monthly_cost": to_record(sol.monthly_cost),
            "throughput_ops": sol.predicted.throughput_ops,
        },
        "bill_lines": list(Bill.LINES),
        "budget_range": [min(budgets), max(budgets)],
        "providers": sorted({r.provider for r in run.frontier}),
        "colours": COLOURS,
        "rows": rows,
        "presets": presets,
        "steps": [{"cost": c, **a} for c, a in steps],
        "robustness": to_record(sol.robustness),
        "binding": to_record(sol.binding),
        "certificate": to_record(sol.certificate),
        "cheapest_meeting_need": to_record(sol.cheapest_meeting_need),
    }


def render(page: dict[str, Any]) -> str:
    """The page's HTML text for :func:`page_data`'s ``page``."""
    template = (resources.files("report") / "templates" / TEMPLATE).read_text(encoding="utf-8")
    # JSON inside <script>: "</" would end the element early
    data = to_json(page, indent=None).replace("</", "<\\/")
    head, tail = template.split(PLOTLY_MARK)
    return head + plotly_js().replace("</script", "<\\/script") + tail.replace(DATA_MARK, data)


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    """Write the page (default ``RUN_DIR/report.html``) atomically. ``out`` may not be one of the run's
    files (:data:`RUN_INPUTS`: the page would replace what it is made from), checked first."""
    path = out if out is not None else run_dir / "report.html"
    check_not_an_input(path, "--out", [run_dir / n for n in RUN_INPUTS])
    plot = run_dir / FRONTIER_PLOT
    if plot.exists() and path.resolve() == plot.resolve():
        raise InputError(f"--out {out}: is the run's plot (`cosine solve --plot` wrote it); refusing to overwrite it")
    page = page_data(run_dir)
    check_output_file(path, "--out")
    return write_text(path, render(page))
