"""Summaries, ratios against the peers, the goals, and the text table."""

from __future__ import annotations

import math
import statistics
from typing import Any

from benchmarks import scale
from benchmarks.programs import SYSTEM_LABELS

PEERS = ("catalyst", "lightning", "jax")
SHORT = {"cofactor": "cofactor", "catalyst": "Catalyst", "lightning": "lightning", "jax": "jax.jit"}


def stats(samples: list[float] | float | None) -> dict | None:
    """median/min/max/count of a list of seconds (a single value counts as one sample)."""
    if samples is None:
        return None
    if isinstance(samples, int | float):
        samples = [float(samples)]
    if not samples:
        return None
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
    }


def median(entry: Any) -> float | None:
    if isinstance(entry, dict) and isinstance(entry.get("median"), int | float):
        return entry["median"]
    return None


def ratio(cf: Any, peer: Any) -> float | None:
    a, b = median(cf), median(peer)
    if a is None or b is None or b <= 0:
        return None
    return a / b


def fmt_time(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "n/a"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def fmt_entry(entry: Any) -> str:
    """`median (min-max)`, or `n/a (reason)`."""
    if entry is None:
        return "-"
    if isinstance(entry, dict) and "error" in entry:
        return "n/a"
    m = median(entry)
    if m is None:
        return "-"
    if entry.get("n", 1) > 1:
        lo, hi = entry["min"], entry["max"]
        return f"{fmt_time(m)} ({fmt_time(lo).split()[0]}-{fmt_time(hi)})"
    return fmt_time(m)


def fmt_ratio(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.2f}x"


# -- table ------------------------------------------------------------------------------


class Table:
    def __init__(self, title: str, systems: tuple[str, ...], peers: tuple[str, ...]):
        self.title = title
        self.systems = systems
        self.peers = peers
        self.rows: list[list[str]] = []
        self.notes: list[str] = []

    def add(self, label: str, entries: dict[str, Any]) -> None:
        row = [label] + [fmt_entry(entries.get(s)) for s in self.systems]
        row += [fmt_ratio(ratio(entries.get("cofactor"), entries.get(p))) for p in self.peers]
        self.rows.append(row)
        for s in self.systems:
            e = entries.get(s)
            if isinstance(e, dict) and "error" in e:
                note = f"{SHORT[s]}, {label}: n/a ({e['error']})"
                self.notes.append(note)

    def render(self) -> str:
        header = ["", *(SHORT[s] for s in self.systems)]
        header += [f"cf/{SHORT[p]}" for p in self.peers]
        return render_rows(self.title, header, self.rows, self.notes)


def render_rows(title: str, header: list[str], rows: list[list[str]], notes: list[str]) -> str:
    rows = [header, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"## {title}"]
    for k, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    seen: set[str] = set()
    for note in notes:
        if note not in seen:
            seen.add(note)
            lines.append(f"  * {note}")
    return "\n".join(lines)


def build_tables(res: dict) -> list[Table]:
    tables = []
    if "compile" in res:
        t = Table(
            "1. compile time (first call minus a later call; cold = new process)",
            ("cofactor", "catalyst", "jax"),
            ("catalyst", "jax"),
        )
        names = {"a": "(a) 4q circuit", "b": "(b) grad of (a)", "c": "(c) 50-step GD loop"}
        for prog, label in names.items():
            per = res["compile"].get(prog, {})
            for kind in ("cold", "warm"):
                t.add(f"{label}, {kind}", {s: _pick(per.get(s), kind) for s in per})
        t.add(
            "import (cold process)",
            {
                s: _pick(res["compile"].get("a", {}).get(s), "import")
                for s in res["compile"].get("a", {})
            },
        )
        cached = _cached_load(res)
        if cached is not None:
            t.add("(a) cached, new process, CPU", {"cofactor": _pick(cached, "cpu")})
            t.add("(a) cached, new process, wall", {"cofactor": _pick(cached, "wall")})
            t.notes.append(
                "cached: the first call of (a) in a new process, its library in cofactor's "
                "disk cache (trace, key, lookup, load, run); the QNode and device are built "
                "before it (PennyLane's)"
            )
        for prog in ("a", "b", "c"):
            stages = (res["compile"].get(prog, {}).get("cofactor") or {}).get("stages_s")
            if stages:
                parts = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in stages.items() if k != "total")
                t.notes.append(
                    f"cofactor compile of ({prog}) by stage, ms (median over cold processes, "
                    f"after the warm ones): {parts}; total {stages.get('total', 0) * 1e3:.0f}"
                )
        tables.append(t)
    if "percall" in res:
        t = Table(
            "2. time per call after compilation",
            ("cofactor", "catalyst", "lightning", "jax"),
            ("catalyst", "jax"),
        )
        t.add("1-qubit RX circuit", res["percall"].get("rx", {}))
        t.add("no circuit (x*2+1)", res["percall"].get("nocircuit", {}))
        tables.append(t)
    if "sel" in res:
        t = Table(
            f"3. StronglyEntanglingLayers ({res['meta'].get('sel_layers', 4)} layers, "
            "expval Z0), time per call",
            ("cofactor", "catalyst", "lightning", "jax"),
            PEERS,
        )
        for part in ("forward", "gradient"):
            per = res["sel"].get(part, {})
            ns = sorted({int(n) for s in per.values() for n in s}, key=int)
            for n in ns:
                t.add(f"{part}, n={n}", {s: per[s].get(str(n)) for s in per})
        t.notes.append("gradient / own forward, per system: " + _gradient_over_forward(res["sel"]))
        tables.append(t)
    if "loop" in res:
        t = Table(
            "4. 50-step gradient descent on (3), one call",
            ("cofactor", "catalyst", "lightning", "jax"),
            PEERS,
        )
        per = res["loop"]
        ns = sorted({int(n) for s in per.values() for n in s})
        for n in ns:
            t.add(f"n={n}", {s: per[s].get(str(n)) for s in per})
        tables.append(t)
    if "gates" in res:
        tables.append(gates_table(res["gates"], res["meta"]["machine"].get("l3_bytes")))
    if "scale" in res:
        tables.append(scale.table(res["scale"], Table, stats))
    if "fusion" in res:
        tables.append(fusion_table(res["fusion"]))
    return tables


class _Rendered:
    def __init__(self, text: str):
        self.text = text

    def render(self) -> str:
        return self.text


def fusion_table(f: dict) -> _Rendered:
    """Section 6: cofactor with fusion off / at each width / default, against Catalyst."""
    rows = []
    programs = (
        (f"SEL forward, n={f.get('sel_n')}", f.get("sel", {})),
        (f"SEL gradient, n={f.get('sel_n')}", f.get("sel_gradient", {})),
        ("long 16-wire circuit (2,016 gates)", f.get("long", {})),
    )
    programs += tuple((f"SEL forward, n={n}", per) for n, per in f.get("sel_extra", {}).items())
    for label, per in programs:
        cat, off = per.get("catalyst"), per.get("off")
        for name, entry in per.items():
            rows.append(
                [
                    f"{label}, {name}",
                    fmt_entry(entry),
                    fmt_ratio(ratio(entry, off)),
                    fmt_ratio(ratio(entry, cat)),
                ]
            )
    notes = [
        "variants: cofactor with COFACTOR_FUSION=0 (off), COFACTOR_FUSION_QUBITS=k, and the "
        "runtime's default; ratios of medians to the unfused run and to Catalyst "
        "(goals: SEL forward <= 0.5x Catalyst with fusion at every n measured -- issue 14's "
        "n=20 in a full run, n=16 in both -- and the long circuit)"
    ]
    grad, fwd = f.get("sel_gradient", {}), f.get("sel", {})
    cells = [
        f"{name} {fmt_ratio(ratio(grad[name], fwd.get(name)))}"
        for name in grad
        if ratio(grad[name], fwd.get(name)) is not None
    ]
    if cells:
        notes.append("SEL gradient / own forward (goal <= 4x): " + ", ".join(cells))
    header = ["", "time", "/off", "/Catalyst"]
    return _Rendered(render_rows("6. gate fusion (one thread)", header, rows, notes))


def _gradient_over_forward(sel: dict) -> str:
    """The cost of a gradient in forward passes, for each system and n."""
    parts = []
    for system, grads in sel.get("gradient", {}).items():
        forwards = sel.get("forward", {}).get(system, {})
        cells = [
            f"n={n} {fmt_ratio(ratio(grads[n], forwards.get(n)))}"
            for n in sorted(grads, key=int)
            if ratio(grads[n], forwards.get(n)) is not None
        ]
        if cells:
            parts.append(f"{system} " + ", ".join(cells))
    return "; ".join(parts) or "n/a"


def _probes(per_n: dict) -> str:
    used = f"{per_n['bandwidth_Bps'] / 1e9:.1f} GB/s"
    probes = per_n.get("probes_Bps")
    if not probes:
        return used
    return used + " (best of " + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in probes.items()) + ")"


def _cached_load(res: dict) -> dict | None:
    """Section 1's cached first call of (a) in a new process (cofactor only), if measured."""
    entry = (res.get("compile", {}).get("a", {}).get("cofactor") or {}).get("cached_load")
    return entry if isinstance(entry, dict) else None


def _pick(entry: Any, kind: str) -> Any:
    if not isinstance(entry, dict):
        return None
    if "error" in entry and kind not in entry:
        return {"error": entry["error"]}
    return entry.get(kind)


def gates_table(g: dict, l3_bytes: int | None = None) -> Table:
    t = Table(
        "5. time per gate vs the memory bound (bytes read+written / measured bandwidth)",
        ("cofactor", "lightning"),
        ("lightning",),
    )
    if "error" in g:
        t.notes.append(f"n/a ({g['error']})")
        return t
    for n, per_n in g.get("sizes", {}).items():
        ratios = []
        for name, e in per_n["gates"].items():
            if "error" in e:
                t.notes.append(f"{name}, n={n}: n/a ({e['error']})")
                continue
            bound = e["bound_s"]
            r_bound = median(e["cofactor"]) / bound
            ratios.append((r_bound, name))
            row = [
                f"{name}, n={n}",
                fmt_entry(e["cofactor"]),
                fmt_entry(e.get("lightning")),
                fmt_ratio(ratio(e["cofactor"], e.get("lightning"))),
                fmt_time(bound),
                fmt_ratio(r_bound),
            ]
            t.rows.append(row)
        if l3_bytes and 16 * 2 ** int(n) <= l3_bytes:
            t.notes.append(
                f"n={n}: the {16 * 2 ** int(n) >> 20} MiB state fits in the "
                f"{l3_bytes >> 20} MiB L3 cache, so the bound (from DRAM-sized probes) is not "
                "a strict bound there; n >= 22 is the memory-bound regime"
            )
        if ratios:
            gm = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
            worst = max(ratios)
            t.notes.append(
                f"n={n}: cofactor/bound geometric mean {gm:.2f}x, worst {worst[0]:.2f}x "
                f"({worst[1]}); bandwidth {_probes(per_n)}"
            )
    adj = g.get("adjoint")
    if isinstance(adj, dict):
        if "error" in adj:
            t.notes.append(f"runtime adjoint Jacobian: n/a ({adj['error']})")
        else:
            t.notes.append(
                f"runtime adjoint Jacobian via ctypes (no frontend), n={adj['n']}, "
                f"{adj['circuit']}: forward {fmt_time(adj['forward_s'])}, forward+adjoint "
                f"{fmt_time(adj['adjoint_s'])} = {adj['adjoint_s'] / adj['forward_s']:.2f}x"
            )
    header = ["", "cofactor", "lightning", "cf/lightning", "bound", "cf/bound"]
    t.render = lambda: render_rows(t.title, header, t.rows, t.notes)  # type: ignore[method-assign]
    return t


# -- goals ------------------------------------------------------------------------------


def goals(res: dict) -> list[dict]:
    """The issue's goals next to what was measured (never hidden when missed)."""
    out = []

    def add(
        goal: str,
        measured: str,
        value: float | None,
        target: float,
        note: str = "",
        unit: str = "x",
    ):
        met = None if value is None else value <= target
        out.append(
            {
                "goal": goal,
                "measured": measured,
                "ratio": value,
                "target": target,
                "met": met,
                "note": note,
                "unit": unit,
            }
        )

    comp = res.get("compile", {})
    for prog in ("a", "b", "c") if comp else ():
        per = comp.get(prog, {})
        for kind in ("cold", "warm"):
            cf, cat = _pick(per.get("cofactor"), kind), _pick(per.get("catalyst"), kind)
            r = ratio(cf, cat)
            why = _why(cf, cat, "cofactor", "catalyst")
            add(
                f"compile ({prog}) {kind}: >= 5x faster than Catalyst",
                f"cofactor/Catalyst = {fmt_ratio(r)}",
                r,
                0.2,
                why,
            )
    cached = _cached_load(res)
    if cached is not None:
        cpu, wall = median(cached.get("cpu")), median(cached.get("wall"))
        add(
            "compile (a), cached, new process: first call <= 5 ms beyond import",
            "n/a (" + cached["error"] + ")"
            if "error" in cached
            else f"CPU {fmt_entry(cached['cpu'])}, wall {fmt_entry(cached['wall'])}",
            None if cpu is None else cpu * 1e3,
            5.0,
            "CPU time of the call (the least disturbed figure on a shared machine; wall "
            f"{'n/a' if wall is None else f'{wall * 1e3:.1f} ms'}), load average "
            f"{cached.get('loadavg', float('nan')):.1f}; building the QNode and its device "
            "before the call is PennyLane's and not counted",
            unit=" ms",
        )
    pc = res.get("percall", {})
    for key, label in (("rx", "1-qubit RX"), ("nocircuit", "no circuit")) if pc else ():
        per = pc.get(key, {})
        r = ratio(per.get("cofactor"), per.get("jax"))
        add(
            f"per call ({label}): within 2x of jax.jit",
            f"cofactor {fmt_entry(per.get('cofactor'))} vs jax.jit {fmt_entry(per.get('jax'))}"
            f" = {fmt_ratio(r)}",
            r,
            2.0,
            _why(per.get("cofactor"), per.get("jax"), "cofactor", "jax"),
        )
    sel = res.get("sel", {})
    fwd = sel.get("forward", {}).get("cofactor", {})
    grd = sel.get("gradient", {}).get("cofactor", {})
    ns = sorted(int(n) for n in fwd)
    if ns:
        n = 20 if 20 in ns else ns[-1]
        f, g = fwd.get(str(n)), grd.get(str(n))
        r = ratio(g, f)
        note = _why(g, f, "cofactor gradient", "cofactor forward")
        if n != 20:
            note = (note + "; " if note else "") + f"largest n measured is {n}, not 20"
        adj = res.get("gates", {}).get("adjoint")
        if isinstance(adj, dict) and "adjoint_s" in adj:
            note += (
                f"; indication: runtime adjoint via ctypes at n={adj['n']} = "
                f"{adj['adjoint_s'] / adj['forward_s']:.2f}x forward"
            )
        add(
            f"gradient within 4x of own forward (n={n})",
            f"cofactor gradient/forward = {fmt_ratio(r)}",
            r,
            4.0,
            note.strip("; "),
        )
    l3 = res.get("meta", {}).get("machine", {}).get("l3_bytes")
    for n, per_n in res.get("gates", {}).get("sizes", {}).items():
        ok = [e for e in per_n["gates"].values() if "error" not in e]
        rs = [median(e["cofactor"]) / e["bound_s"] for e in ok]
        best = [e["cofactor"]["min"] / e["bound_s"] for e in ok]
        if rs:
            gm = _gmean(rs)
            add(
                f"per gate within 1.2x of the memory bound (n={n})",
                f"geometric mean over {len(rs)} gates {gm:.2f}x, worst {max(rs):.2f}x",
                gm,
                1.2,
                ("state fits in L3, bound not strict; " if l3 and 16 * 2 ** int(n) <= l3 else "")
                + f"{sum(r <= 1.2 for r in rs)}/{len(rs)} gates within 1.2x (medians); with each "
                f"gate's fastest run instead: geometric mean {_gmean(best):.2f}x (the bound is "
                "the best bandwidth seen, the machine is shared)",
            )
    if "kernels" in res:
        from benchmarks import kernels  # imports this module

        out += kernels.goals(res["kernels"])
    if "contention" in res:
        from benchmarks import contention  # imports this module

        out += contention.goals(res["contention"])
    if "scale" in res:
        scale.goals(res["scale"], add, ratio, stats)
    fu = res.get("fusion", {})
    checks = [(fu.get("sel", {}), f"SEL forward n={fu.get('sel_n')}")]
    checks += [(per, f"SEL forward n={n}") for n, per in fu.get("sel_extra", {}).items()]
    checks.append((fu.get("long", {}), "long 16-wire"))
    for per, label in checks:
        if per:
            r = ratio(per.get("default"), per.get("catalyst"))
            add(
                f"{label}, fused, one thread: <= 0.5x Catalyst",
                f"cofactor (default fusion)/Catalyst = {fmt_ratio(r)}",
                r,
                0.5,
                _why(per.get("default"), per.get("catalyst"), "cofactor", "catalyst"),
            )
    grad, fwd = fu.get("sel_gradient", {}).get("default"), fu.get("sel", {}).get("default")
    if grad or fwd:
        r = ratio(grad, fwd)
        add(
            f"SEL gradient n={fu.get('sel_n')}, fused, one thread: <= 4x own forward",
            f"cofactor gradient/forward (default fusion) = {fmt_ratio(r)}",
            r,
            4.0,
            _why(grad, fwd, "gradient", "forward"),
        )
    return out


def _gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _why(a: Any, b: Any, name_a: str, name_b: str) -> str:
    reasons = []
    for e, name in ((a, name_a), (b, name_b)):
        if isinstance(e, dict) and "error" in e:
            reasons.append(f"{name} n/a: {e['error']}")
        elif e is None:
            reasons.append(f"{name} not measured")
    return "; ".join(reasons)


def agreement(res: dict, rtol: float = 1e-6, atol: float = 1e-9) -> list[str]:
    """Do the systems compute the same numbers? (A fast wrong answer is no result.)

    Compares the value of each program's result (arrays: their sum) across systems; returns
    one line per disagreement (empty: all agree)."""
    groups: dict[str, dict[str, float]] = {}

    def put(label: str, system: str, entry: Any) -> None:
        if isinstance(entry, dict) and isinstance(entry.get("value"), int | float):
            groups.setdefault(label, {})[system] = entry["value"]

    for prog, per in res.get("compile", {}).items():
        for system, e in per.items():
            put(f"compile ({prog})", system, e)
    for key, per in res.get("percall", {}).items():
        for system, e in per.items():
            put(f"per call {key}", system, e)
    for part, per in res.get("sel", {}).items():
        for system, per_n in per.items():
            for n, e in per_n.items():
                put(f"SEL {part} n={n}", system, e)
    for system, per_n in res.get("loop", {}).items():
        for n, e in per_n.items():
            put(f"GD loop n={n}", system, e)
    scale.values(res.get("scale", {}), put)
    bad = []
    for label, values in groups.items():
        ref_system = "catalyst" if "catalyst" in values else next(iter(values))
        ref = values[ref_system]
        for system, v in values.items():
            if abs(v - ref) > atol + rtol * abs(ref):
                bad.append(f"{label}: {SHORT[system]} {v:.10g} vs {SHORT[ref_system]} {ref:.10g}")
    return bad


def render_agreement(bad: list[str] | None) -> str:
    if bad is None:
        return ""
    if not bad:
        return "results agree across systems (each program's value, rtol 1e-6)"
    return "RESULTS DISAGREE (timings of these are not comparable):\n" + "\n".join(
        f"  * {b}" for b in bad
    )


def render_goals(gs: list[dict]) -> str:
    lines = ["## goals (ratio = cofactor / reference; lower is better)"]
    for g in gs:
        status = "n/a" if g["met"] is None else ("MET" if g["met"] else "MISSED")
        target = f"{g['target']}{g.get('unit', 'x')}"
        lines.append(f"  [{status:>6}] {g['goal']} (target <= {target}): {g['measured']}")
        if g["note"]:
            lines.append(f"           {g['note']}")
    return "\n".join(lines)


def render(res: dict) -> str:
    meta = res["meta"]
    v = meta.get("versions", {})
    head = [
        f"# cofactor benchmarks ({meta['mode']} run, {meta['date']}, git {meta['git']})",
        f"machine: {meta['machine']['cpu']}, {meta['machine']['cores']} cores, "
        f"load average at start {', '.join(f'{x:.1f}' for x in meta['machine']['loadavg_start'])}"
        f", at end {', '.join(f'{x:.1f}' for x in meta.get('loadavg_end', ()))}; "
        f"threads per process: {meta['threads'] or 'default'}",
        "cofactor venv: " + ", ".join(f"{k} {x}" for k, x in v.get("cofactor", {}).items()),
        "cofactor toolchain: "
        + ", ".join(f"{k} {x}" for k, x in v.get("cofactor toolchain", {}).items()),
        "peers venv:    " + ", ".join(f"{k} {x}" for k, x in v.get("peers", {}).items()),
        f"wall time {meta.get('wall_s', '?')} s; compile figures without cofactor's disk cache "
        "(COFACTOR_DISABLE_CACHE=1)",
        "systems: " + "; ".join(f"{SHORT[s]} = {label}" for s, label in SYSTEM_LABELS.items()),
        "cells: median (min-max) over repeated runs; ratios are cofactor/peer of the medians "
        "(< 1: cofactor faster); n/a: not measurable, reason below the table.",
    ]
    parts = ["\n".join(head)]
    parts += [t.render() for t in build_tables(res)]
    if "kernels" in res:
        from benchmarks import kernels  # imports this module

        parts.append(kernels.render(res["kernels"]))
    if "contention" in res:
        from benchmarks import contention  # imports this module

        parts.append(contention.render(res["contention"]))
    parts.append(render_goals(res.get("goals", [])))
    parts.append(render_agreement(res.get("agreement")))
    return "\n\n".join(parts)
