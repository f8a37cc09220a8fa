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


def write_plot(report: ProbeReport, path: str) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    blocks = [block for block in report.blocks if block.grad_norm is not None]
    positions = {block.name: index for index, block in enumerate(blocks)}
    figure, axis = plt.subplots(figsize=(max(6.0, 0.35 * len(blocks) + 3), 4.5))
    xs, ys = [], []
    for stats in report.parameters:
        if stats.group in positions and stats.grad_norm is not None and math.isfinite(stats.grad_norm) and stats.grad_norm > 0:
            xs.append(positions[stats.group])
            ys.append(stats.grad_norm)
    axis.scatter(xs, ys, s=10, color="0.6", label="parameters", zorder=2)
    block_x = [positions[b.name] for b in blocks if math.isfinite(b.grad_norm) and b.grad_norm > 0]
    block_y = [b.grad_norm for b in blocks if math.isfinite(b.grad_norm) and b.grad_norm > 0]
    axis.plot(block_x, block_y, marker="o", color="tab:blue", label="block (all its parameters)", zorder=3)
    axis.set_yscale("log")
    axis.set_xticks(range(len(blocks)))
    step = max(1, len(blocks) // 24)
    axis.set_xticklabels([block.name if index % step == 0 else "" for index, block in enumerate(blocks)],
                         rotation=60, ha="right", fontsize=8)
    axis.set_xlabel("input side  →  output side (forward order)")
    axis.set_ylabel("gradient norm (log scale)")
    codes = ", ".join(sorted({finding.code for finding in report.findings})) or "no findings"
    axis.set_title(f"{report.model}: gradient norm per layer ({report.device}, {report.dtype}, loss {report.loss_kind}) — {codes}",
                   fontsize=9)
    axis.grid(True, which="both", axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
