"""`--plot OUT.png`: gradient norm per layer on a log axis (matplotlib, the optional extra `reslint[plot]`)."""

from __future__ import annotations

import math

from reslint.probing.report import ProbeReport

MISSING = "--plot needs matplotlib, which is not installed: pip install 'reslint[plot]' (or pip install matplotlib)"


class PlotUnavailable(Exception):
    """matplotlib cannot be imported (one-line reason)."""


def require_matplotlib() -> None:
    """Fail before the probe runs, not after: the measurement may take minutes on a large model."""
    try:
        import matplotlib  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install raises more than ImportError
        raise PlotUnavailable(MISSING) from None


def write_plot(reports: list[ProbeReport], path: str) -> None:
    """One line of block gradient norms per model (the probed one, then a --compare'd one), its parameters as dots."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reslint.probing.text import name_of

    names: list[str] = []  # the blocks of every model, in the first model's forward order, then new ones
    for report in reports:
        names += [block.name for block in report.blocks if block.grad_norm is not None and block.name not in names]
    positions = {name: index for index, name in enumerate(names)}
    figure, axis = plt.subplots(figsize=(max(6.0, 0.35 * len(names) + 3), 4.5))
    for report, colour in zip(reports, ("tab:blue", "tab:orange")):
        label = name_of(report)
        xs, ys = [], []
        for stats in report.parameters:
            if stats.group in positions and drawable(stats.grad_norm):
                xs.append(positions[stats.group])
                ys.append(stats.grad_norm)
        axis.scatter(xs, ys, s=10, color=colour, alpha=0.35, label=f"{label}: parameters", zorder=2)
        blocks = [block for block in report.blocks if block.name in positions and drawable(block.grad_norm)]
        axis.plot([positions[block.name] for block in blocks], [block.grad_norm for block in blocks], marker="o",
                  color=colour, label=f"{label}: block (all its parameters)", zorder=3)
    axis.set_yscale("log")
    axis.set_xticks(range(len(names)))
    step = max(1, len(names) // 24)
    axis.set_xticklabels([name if index % step == 0 else "" for index, name in enumerate(names)],
                         rotation=60, ha="right", fontsize=8)
    axis.set_xlabel("input side  →  output side (forward order)")
    axis.set_ylabel("gradient norm (log scale)")
    first = reports[0]
    codes = ", ".join(sorted({finding.code for report in reports for finding in report.findings})) or "no findings"
    axis.set_title(f"gradient norm per layer ({first.device}, {first.dtype}, loss {first.loss_kind}) — {codes}",
                   fontsize=9)
    axis.grid(True, which="both", axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def drawable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0
