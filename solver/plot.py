"""frontier.png: cost (log) vs throughput, colour by provider, marker by class,
with the fixed presets on the same hardware as baseline curves (paper Fig. 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

COLOURS = {"aws": "#ff9900", "gcp": "#4285f4", "azure": "#008272"}
MARKERS = {"lsm": "o", "btree": "s", "lsh": "^", "hybrid": "D"}
PRESET_STYLE = {"rocksdb": ("k", "--"), "wiredtiger": ("tab:purple", ":"), "faster": ("tab:red", "-.")}


def plot_frontier(run_dir: Path, out: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = pq.ParquetFile(run_dir / "frontier.parquet").read().to_pylist()
    base = (
        pq.ParquetFile(run_dir / "baselines.parquet").read().to_pylist()
        if (run_dir / "baselines.parquet").exists()
        else []
    )
    sol = json.loads((run_dir / "solution.json").read_text())
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
        best: dict[int, dict] = {}
        for r in base:
            if r["preset"] == preset and (
                r["band"] not in best or r["throughput_ops"] > best[r["band"]]["throughput_ops"]
            ):
                best[r["band"]] = r
        if best:
            pts = sorted(best.values(), key=lambda r: r["budget"])
            ax.step(
                [r["budget"] for r in pts],
                [r["throughput_ops"] for r in pts],
                where="post",
                color=col,
                ls=ls,
                lw=1.5,
                label=f"{preset} (preset, best provider)",
            )
    ax.axvline(sol["budget"], color="gray", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("monthly budget (USD, log)")
    ax.set_ylabel("throughput (ops/s, log)")
    ax.set_title(f"Cosine frontier for {sol['spec']} ({sol['pricing']} prices)")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    out = out or run_dir / "frontier.png"
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
