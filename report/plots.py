"""Every figure the commands write (matplotlib, Agg back end):

* ``frontier.png``: cost (log) vs throughput, colour by provider, marker by
  class, with the fixed presets on the same hardware as baseline curves (paper Fig. 5);
  with robustness a second panel puts the nominal and the robust frontiers
  side by side (best across providers per band, expected and perturbed throughput);
* ``validation.png``: the model's blocks per operation against the engine's;
* ``robust_delta_*.png``: ENDURE's gain of robust over nominal tuning.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from solver.rundir import Solution

#: The frontier's plot in a run directory (`cosine solve --plot`).
FRONTIER_PLOT = "frontier.png"
COLOURS = {"aws": "#ff9900", "gcp": "#4285f4", "azure": "#008272"}
MARKERS = {"lsm": "o", "btree": "s", "lsh": "^", "hybrid": "D"}
PRESET_STYLE = {"rocksdb": ("k", "--"), "wiredtiger": ("tab:purple", ":"), "faster": ("tab:red", "-.")}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def preset_frontier(baselines: list[dict[str, Any]], preset: str) -> list[dict[str, Any]]:
    """A preset's frontier: per band, its fastest cluster over the providers, by budget."""
    best: dict[int, dict[str, Any]] = {}
    for r in baselines:
        if r["preset"] == preset and (r["band"] not in best or r["throughput_ops"] > best[r["band"]]["throughput_ops"]):
            best[r["band"]] = r
    return sorted(best.values(), key=lambda r: r["budget"])


def plot_frontier(run_dir: Path, out: Path | None = None) -> Path:
    """The frontier of a run directory, per provider, beside the presets' best homogeneous clusters."""
    from dataclasses import asdict

    from solver.rundir import load_run

    plt = _pyplot()
    run = load_run(run_dir, baselines=True)
    rows = [{**asdict(r), "class": r.design_class} for r in run.frontier]
    base = [{**asdict(r), "class": r.design_class} for r in run.baselines]
    sol = run.solution
    robust = any(r["nominal_throughput_ops"] is not None for r in rows)
    if robust:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, 5.5))
        _robust_panel(ax2, rows, sol)
    else:
        fig, ax = plt.subplots(figsize=(9, 5.5))
    for prov in sorted({r["provider"] for r in rows}):
        pts = sorted((r for r in rows if r["provider"] == prov and r["throughput_ops"]), key=lambda r: r["budget"])
        if not pts:
            continue
        ax.step(
            [r["budget"] for r in pts],
            [r["throughput_ops"] for r in pts],
            where="post",
            color=COLOURS.get(prov, "gray"),
            alpha=0.5,
            lw=1,
        )
        for cls, mk in MARKERS.items():
            sel = [r for r in pts if r["class"] == cls]
            if sel:
                ax.scatter(
                    [r["budget"] for r in sel],
                    [r["throughput_ops"] for r in sel],
                    marker=mk,
                    s=22,
                    color=COLOURS.get(prov, "gray"),
                    label=f"{prov} {cls}",
                )
    for preset, (col, ls) in PRESET_STYLE.items():
        pts = preset_frontier(base, preset)
        if pts:
            ax.step(
                [r["budget"] for r in pts],
                [r["throughput_ops"] for r in pts],
                where="post",
                color=col,
                ls=ls,
                lw=1.5,
                label=f"{preset} (preset, best provider)",
            )
    ax.axvline(sol.budget, color="gray", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("monthly budget (USD, log)")
    ax.set_ylabel("throughput (ops/s, log)")
    ax.set_title(f"Cosine frontier for {sol.spec} ({sol.pricing} prices)")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    return _save(fig, out or run_dir / FRONTIER_PLOT)


#: The paper's Fig. 5 layout: two rows of five panels.
FIG5_LAYOUT = ("ABCDE", "FGHIJ")


def plot_fig5(rows: list[dict[str, Any]], out: Path) -> Path:
    """The paper's Fig. 5: one panel per workload (2 x 5), throughput against the monthly
    budget for Cosine (colour: provider, marker: design class) and the presets on AWS."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(FIG5_LAYOUT), len(FIG5_LAYOUT[0]), figsize=(22, 8.5), squeeze=False)
    for r_i, line in enumerate(FIG5_LAYOUT):
        for c_i, panel in enumerate(line):
            ax = axes[r_i][c_i]
            pts = [r for r in rows if r["panel"] == panel and r["throughput_ops"]]
            if not pts:
                ax.set_axis_off()
                continue
            for preset, (col, ls) in PRESET_STYLE.items():
                pp = sorted((r for r in pts if r["system"] == preset), key=lambda r: r["budget"])
                if pp:
                    xs, ys = [r["budget"] for r in pp], [r["throughput_ops"] for r in pp]
                    ax.step(xs, ys, where="post", color=col, ls=ls, lw=1.5, label=preset)
            cos = sorted((r for r in pts if r["system"] == "cosine"), key=lambda r: r["budget"])
            ax.step([r["budget"] for r in cos], [r["throughput_ops"] for r in cos], where="post", color="gray", lw=0.8)
            for r in cos:
                ax.scatter(
                    r["budget"],
                    r["throughput_ops"],
                    marker=MARKERS.get(r["class"], "o"),
                    color=COLOURS.get(r["provider"], "gray"),
                    s=26,
                    zorder=3,
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"({panel}) {pts[0]['workload']}", fontsize=9)
            ax.grid(True, which="both", alpha=0.2)
            if c_i == 0:
                ax.set_ylabel("throughput (ops/s)")
            if r_i == len(FIG5_LAYOUT) - 1:
                ax.set_xlabel("monthly budget (USD)")
    handles = [plt.Line2D([], [], color=col, ls=ls, label=f"{p} (AWS)") for p, (col, ls) in PRESET_STYLE.items()] + [
        plt.Line2D([], [], color=c, marker="o", ls="", label=f"Cosine on {p}") for p, c in COLOURS.items()
    ]
    handles += [plt.Line2D([], [], color="gray", marker=m, ls="", label=f"Cosine {k}") for k, m in MARKERS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.subplots_adjust(left=0.04, right=0.99, bottom=0.11, top=0.95, wspace=0.22, hspace=0.3)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def robust_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per band, the best point across providers of the robust frontier (the
    headline) and of the nominal one, each on both workloads."""
    out = []
    for band in sorted({r["band"] for r in rows}):
        rs = [r for r in rows if r["band"] == band]
        rob = max(rs, key=lambda r: r["throughput_ops"] or 0.0)
        nom = max(rs, key=lambda r: r["nominal_throughput_ops"] or 0.0)
        out.append(
            {
                "band": band,
                "budget": rs[0]["budget"],
                "robust_ops": rob["throughput_ops"],
                "robust_perturbed_ops": rob["perturbed_ops"],
                "robust_provider": rob["provider"] if rob["throughput_ops"] else None,
                "robust_class": rob["class"] or None,
                "robust_cost": rob["monthly_cost"],
                "nominal_ops": nom["nominal_throughput_ops"],
                "nominal_perturbed_ops": nom["nominal_perturbed_ops"],
                "nominal_provider": nom["provider"] if nom["nominal_throughput_ops"] else None,
                "nominal_class": nom["nominal_class"],
                "nominal_cost": nom["nominal_monthly_cost"],
                "best_perturbed_ops": max((r["best_perturbed_ops"] or 0.0) for r in rs) or None,
            }
        )
    return out


def _robust_panel(ax: Any, rows: list[dict[str, Any]], sol: Solution) -> None:
    t = [r for r in robust_table(rows) if r["robust_ops"] or r["nominal_ops"]]
    b = [r["budget"] for r in t]
    for key, label, style in (
        ("nominal_ops", "nominal choice, expected workload", ("tab:blue", "-")),
        ("nominal_perturbed_ops", "nominal choice, perturbed workload", ("tab:blue", ":")),
        ("robust_ops", "robust choice, expected workload (headline)", ("tab:red", "-")),
        ("robust_perturbed_ops", "robust choice, perturbed workload", ("tab:red", ":")),
        ("best_perturbed_ops", "best perturbed throughput at the budget", ("gray", "--")),
    ):
        ax.step(b, [r[key] or np.nan for r in t], where="post", color=style[0], ls=style[1], label=label)
    ax.axvline(sol.budget, color="gray", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("monthly budget (USD, log)")
    ax.set_ylabel("throughput (ops/s, log)")
    rob = sol.robustness
    noise, tol = (rob.noise, rob.tolerance) if rob is not None else (0.0, 0.0)
    ax.set_title(f"nominal vs robust (noise {noise:g}, tolerance {tol:g})")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)


def plot_validation(v: Any, out: Path) -> Path:
    """``v``: a :class:`measure.validate.Validation`."""
    plt = _pyplot()

    colours = {"lsm": "#1f77b4", "btree": "#2ca02c", "lsh": "#d62728", "hybrid": "#9467bd"}
    fig, ax = plt.subplots(figsize=(6.5, 6))
    lo = max(1e-4, min(min(r["predicted_io"], r["measured_io"]) for r in v.rows if r["measured_io"] > 0) / 2)
    hi = max(max(r["predicted_io"], r["measured_io"]) for r in v.rows) * 2
    for cls, col in colours.items():
        pts = [r for r in v.rows if r["class"] == cls]
        if pts:
            ax.scatter(
                [max(r["measured_io"], lo) for r in pts],
                [max(r["predicted_io"], lo) for r in pts],
                s=12,
                color=col,
                alpha=0.7,
                label=cls,
            )
    ax.plot([lo, hi], [lo, hi], color="gray", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured blocks per operation (engine)")
    ax.set_ylabel("predicted blocks per operation (model)")
    s = v.summary()
    ax.set_title(f"model vs engine: mean accuracy {s['mean_accuracy']:.1%}, conservative {s['conservative_share']:.0%}")
    ax.legend()
    return _save(fig, out / "validation.png")


def plot_robust_eval(ev: Any, out: Path) -> list[Path]:
    """``ev``: a :class:`studies.robust_eval.RobustEval`."""
    from studies.robust_eval import buckets

    plt = _pyplot()

    out.mkdir(parents=True, exist_ok=True)
    rhos = sorted({r["rho_expected"] for r in ev.rows})
    b = buckets(ev.rows)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for rho in rhos:
        pts = [x for x in b if x["rho_expected"] == rho]
        ax.plot(
            [(x["observed_from"] + min(x["observed_to"], 8)) / 2 for x in pts],
            [x["mean_delta"] for x in pts],
            marker="o",
            label=f"expected rho {rho:g}",
        )
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_xlabel("observed rho = KL(observed || expected), bucket midpoint")
    ax.set_ylabel("mean normalized delta throughput (robust vs nominal)")
    ax.set_title("ENDURE benchmark on the Cosine model: gain by observed drift")
    ax.legend(fontsize=8)
    p1 = _save(fig, out / "robust_delta_vs_rho.png")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for rho in rhos:
        if rho == 0:
            continue
        d = np.array([r["delta"] for r in ev.rows if r["rho_expected"] == rho])
        ax.hist(np.clip(d, -1, 4), bins=80, histtype="step", label=f"expected rho {rho:g}", density=True)
    ax.set_xlabel("normalized delta throughput (clipped to [-1, 4])")
    ax.set_ylabel("density")
    ax.set_title("Distribution of the gain of robust over nominal tuning")
    ax.legend(fontsize=8)
    p2 = _save(fig, out / "robust_delta_distribution.png")
    return [p1, p2]
