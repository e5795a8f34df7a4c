"""A benchmark run in words: the CLI's plain table and the book's benchmarks page, from the same rows.

A row (see :func:`sigprop.bench.run`) names its benchmark, setting, metric and value; the metric decides what the
value is (:func:`quantity`): a fraction of dense-matmul FLOP/s, a speed-up, a largest relative difference, a time
or a peak memory.
"""
from __future__ import annotations


def number(v) -> str:
    """A measured value: three significant digits, or one decimal of a power of ten below 1e-3."""
    if isinstance(v, float):
        return f"{v:.1e}" if 0 < abs(v) < 1e-3 else f"{v:.3g}"
    return str(v)


def quantity(row: dict) -> tuple[str, str]:
    """What a row's value measures, and its unit (with a leading space, or empty)."""
    m = row["metric"]
    if m.startswith("FLOP/s"):
        return "matmul FLOP/s, fraction of dense", ""
    if m.startswith("speedup"):
        return "speed-up", " ×"
    if m.startswith("max |"):
        return "largest relative difference", ""
    return ("peak memory", " MB") if "(MB)" in m else ("time", " s")


def _result(row: dict) -> str:
    name, unit = quantity(row)
    return f"{name}: {number(float(row['value']))}{unit}"


def _goal(row: dict) -> str:
    if not row["goal"]:
        return ""
    return f"{row['goal']}{quantity(row)[1]}: " + ("met" if row["meets"] else "missed")


def speed_table(rows: list):
    """The engine's rows as a pandas DataFrame: benchmark, setting, result with its unit, goal and whether met."""
    import pandas as pd

    return pd.DataFrame([[r["bench"], r["setting"], _result(r), _goal(r)] for r in rows],
                        columns=["benchmark", "setting", "result", "goal"])


def goals_summary(rows: list) -> str:
    """One paragraph: goals met (and which were missed, with their values), and how closely the batched engine
    and ``vmap`` agree with their loops."""
    goals = [r for r in rows if r["meets"] is not None]
    missed = [r for r in goals if not r["meets"]]
    text = f"Goals met in this run: {len(goals) - len(missed)} of {len(goals)}"
    if missed:
        text += ". Missed: " + "; ".join(f"{r['bench']} ({r['setting']}): {_result(r)}, goal {r['goal']}"
                                         for r in missed)
    diff = [r["value"] for r in rows if r["metric"].startswith("max |")]
    grad = [r["max_rel_diff"] for r in rows if r["bench"] == "per-sample grad"]
    if diff:
        text += f". The batched engine and the naive loop agree to a relative {max(diff):.1e} in float64"
    if grad:
        text += f", and `vmap` and the loop of gradients to {max(grad):.1e}"
    return text + "."


def format_table(result: dict) -> str:
    """The result of :func:`sigprop.bench.run` as a plain-text table."""
    rows = result["rows"]
    head = ("benchmark", "setting", "metric", "value", "goal", "meets")
    body = [(r["bench"], r["setting"], r["metric"], number(r["value"]), r["goal"] or "",
             "" if r["meets"] is None else ("yes" if r["meets"] else "NO")) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    line = "  ".join("{:<%d}" % w for w in widths)
    out = [line.format(*head), line.format(*("-" * w for w in widths))]
    out += [line.format(*b) for b in body]
    m = result["meta"]
    out.append("")
    out.append(f"torch {m['torch']}, {m['cpu_count']} CPUs, {m['torch_threads']} threads, cuda: {m['cuda']}; "
               f"load average {m['loadavg_start']} -> {m.get('loadavg_end')}; {m.get('seconds', 0):.0f} s in all")
    return "\n".join(out)
