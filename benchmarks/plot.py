"""Plot latest.json: time against qubit count for each system.

    python -m benchmarks.plot results/latest.json results/latest.png

Runs in the peers venv (matplotlib is not a cofactor dependency).
"""

from __future__ import annotations

import json
import math
import sys

STYLE = {
    "cofactor": ("cofactor", "C3", "o"),
    "catalyst": ("Catalyst (lightning.qubit)", "C0", "s"),
    "lightning": ("lightning.qubit adjoint, no JIT", "C2", "^"),
    "jax": ("default.qubit + jax.jit", "C1", "D"),
    "bound": ("memory bound", "k", "x"),
}


def _series(per_system: dict) -> dict[str, tuple[list[int], list[float], list[float], list[float]]]:
    out = {}
    for system, per_n in per_system.items():
        pts = sorted(
            (int(n), e["median"], e["min"], e["max"])
            for n, e in per_n.items()
            if isinstance(e, dict) and "median" in e
        )
        if pts:
            out[system] = tuple(map(list, zip(*pts, strict=True)))
    return out


def _draw(
    ax, series, title: str, ylabel: str = "time per call (s)", missing: str = "", labels=None
) -> None:
    for system, (ns, med, lo, hi) in series.items():
        label, color, marker = STYLE[system]
        label = (labels or {}).get(system, label)
        yerr = [
            [m - a for m, a in zip(med, lo, strict=True)],
            [b - m for m, b in zip(med, hi, strict=True)],
        ]
        ax.errorbar(ns, med, yerr=yerr, label=label, color=color, marker=marker, capsize=3)
    ax.set_yscale("log")
    ax.set_xlabel("qubits")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.xaxis.get_major_locator().set_params(integer=True)
    if series:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
    if series and "cofactor" not in series and missing:
        ax.text(
            0.02,
            0.98,
            f"cofactor: n/a ({missing})",
            transform=ax.transAxes,
            fontsize=7,
            va="top",
            color=STYLE["cofactor"][1],
            wrap=True,
        )


def _gate_series(gates: dict) -> dict:
    """Geometric mean over gates of the per-gate medians, for each n."""
    acc: dict[str, dict[str, dict]] = {"cofactor": {}, "lightning": {}, "bound": {}}
    for n, per_n in gates.get("sizes", {}).items():
        vals: dict[str, list[float]] = {"cofactor": [], "lightning": [], "bound": []}
        for e in per_n["gates"].values():
            if "error" in e:
                continue
            vals["bound"].append(e["bound_s"])
            for s in ("cofactor", "lightning"):
                if isinstance(e.get(s), dict):
                    vals[s].append(e[s]["median"])
        for s, v in vals.items():
            if v:
                g = math.exp(sum(map(math.log, v)) / len(v))
                acc[s][n] = {"median": g, "min": g, "max": g}
    return _series(acc)


def _first_error(per_n: dict) -> str:
    for e in per_n.values():
        if isinstance(e, dict) and "error" in e:
            return e["error"][:70]
    return ""


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src, dst = sys.argv[1], sys.argv[2]
    res = json.loads(open(src).read())
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    sel = res.get("sel", {})
    for ax, per, title in (
        (axes[0][0], sel.get("forward", {}), "3. StronglyEntanglingLayers forward"),
        (axes[0][1], sel.get("gradient", {}), "3. StronglyEntanglingLayers gradient"),
        (axes[1][0], res.get("loop", {}), "4. 50-step gradient descent (one call)"),
    ):
        _draw(ax, _series(per), title, missing=_first_error(per.get("cofactor", {})))
    _draw(
        axes[1][1],
        _gate_series(res.get("gates", {})),
        "5. time per gate (geometric mean over gates)",
        "time per gate (s)",
        labels={"cofactor": "cofactor runtime kernels", "lightning": "Lightning kernels"},
    )
    meta = res.get("meta", {})
    fig.suptitle(
        f"cofactor vs peers, {meta.get('mode')} run {meta.get('date')} "
        f"(git {meta.get('git')}; median, bars min-max)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(dst, dpi=90)


if __name__ == "__main__":
    main()
