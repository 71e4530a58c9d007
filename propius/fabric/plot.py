"""A picture of who holds what on a fabric (``propius fabric show --png``), one panel per rack.

A torus rack is drawn as its z-planes side by side, each an x×y grid of accelerators, with every server
outlined, so a fragmented slice shows as one colour spread over non-adjacent servers. Any other rack is a
hosts × local-index grid (local index = rail), so a rail-aligned job shows as one colour in the same
columns. Colour = holding job; spares are hatched and marked ``S``, failed accelerators black and marked
``X``. The rails (kind, bandwidth, OCS circuits up) are listed under the racks.

Matplotlib is imported inside :func:`render_png` (it is in the ``dev``/``sim`` extras, not the base
install), so importing this module costs nothing and the fabric package stays usable without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from propius.fabric.model import Accelerator, AcceleratorState
from propius.fabric.state import FabricState

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["render_png"]

FREE_COLOUR = "#f2f2f2"
FAILED_COLOUR = "#222222"
_INCH = 0.28
"""Inches per drawn cell."""
_MAX_WIDTH = 18.0
"""Panels wrap to a new row beyond this width (inches)."""


def render_png(state: FabricState, path: Path) -> None:
    """Write a PNG of ``state`` to ``path``: racks, the job holding each accelerator, spares, failed, rails."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    jobs = sorted({job for acc in state.accelerators if (job := state.job_of(acc)) is not None})
    palette = plt.get_cmap("tab20").colors + plt.get_cmap("tab20b").colors
    colour = {job: palette[k % len(palette)] for k, job in enumerate(jobs)}
    racks = state.fabric.racks
    members = {r.id: [a for a in state.fabric.accelerators if state.hosts[a.host].rack == r.id] for r in racks}
    units = [_panel_units(r.torus, members[r.id]) for r in racks]
    panel_w = max(3.0, _INCH * max(w for w, _ in units))
    panel_h = max(1.6, _INCH * max(h for _, h in units) + 0.5)
    columns = max(1, min(len(racks), int(_MAX_WIDTH // panel_w)))
    rows = -(-len(racks) // columns)
    legend = [Patch(facecolor=colour[j], label=j) for j in jobs]
    legend += [Patch(facecolor=FREE_COLOUR, edgecolor="grey", label="free"),
               Patch(facecolor=FREE_COLOUR, edgecolor="grey", hatch="///", label="spare (S)"),
               Patch(facecolor=FAILED_COLOUR, label="failed (X)")]
    legend_columns = min(6, len(legend))
    legend_h = 0.25 * -(-len(legend) // legend_columns) + 0.2
    rail_lines = _rail_lines(state)
    text_h = 0.17 * (len(rail_lines) + 1) + 0.1 if rail_lines else 0.0
    height = panel_h * rows + legend_h + text_h
    fig, axes = plt.subplots(rows, columns, squeeze=False, figsize=(max(panel_w * columns, 6.0), height))
    for k, rack in enumerate(racks):
        ax = axes[k // columns][k % columns]
        if rack.torus is not None:
            _torus_panel(ax, state, members[rack.id], rack.torus, colour)
            kind = f"{'programmable' if rack.programmable else 'fixed'} {'x'.join(map(str, rack.torus))} torus"
        else:
            _host_panel(ax, state, members[rack.id], colour)
            kind = f"{len({a.host for a in members[rack.id]})} hosts"
        ax.set_title(f"rack {rack.id} ({kind})", fontsize=9)
        ax.set_aspect("equal")
    for k in range(len(racks), rows * columns):
        axes[k // columns][k % columns].axis("off")
    fig.legend(handles=legend, loc="lower center", bbox_to_anchor=(0.5, text_h / height), fontsize=8,
               ncol=legend_columns, frameon=False)
    if rail_lines:
        fig.text(0.01, 0.01, "\n".join(["rails:", *rail_lines]), fontsize=8, family="monospace", va="bottom")
    fig.tight_layout(rect=(0, (legend_h + text_h) / height, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _panel_units(torus: tuple[int, int, int] | None, members: list[Accelerator]) -> tuple[float, float]:
    """A panel's drawing size in cells: z-planes side by side for a torus, hosts × indices otherwise."""
    if torus is not None:
        return torus[2] * (torus[0] + 1), torus[1] + 1.5
    return max((a.index for a in members), default=0) + 4, len({a.host for a in members}) + 1


def _cell(ax: Axes, x: float, y: float, state: FabricState, acc: Accelerator,
          colour: dict[str, tuple[float, ...]]) -> None:
    from matplotlib.patches import Rectangle

    status = state.state(acc.id)
    job = state.job_of(acc.id)
    face = FAILED_COLOUR if status == AcceleratorState.FAILED else colour[job] if job else FREE_COLOUR
    ax.add_patch(Rectangle((x + 0.05, y + 0.05), 0.9, 0.9, facecolor=face, edgecolor="grey", linewidth=0.5,
                           hatch="///" if status == AcceleratorState.SPARE else None))
    mark = {AcceleratorState.SPARE: "S", AcceleratorState.FAILED: "X"}.get(status)
    if mark:
        ax.text(x + 0.5, y + 0.5, mark, ha="center", va="center", fontsize=7, weight="bold",
                color="white" if status == AcceleratorState.FAILED else "black")


def _torus_panel(ax: Axes, state: FabricState, members: list[Accelerator], dims: tuple[int, int, int],
                 colour: dict[str, tuple[float, ...]]) -> None:
    """The z-planes side by side, x to the right and y up; each server's cells outlined in every plane."""
    from matplotlib.patches import Rectangle

    width = dims[0] + 1
    cells: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for acc in members:
        assert acc.coord is not None
        x, y, z = acc.coord
        _cell(ax, z * width + x, y, state, acc, colour)
        cells.setdefault((acc.host, z), []).append((z * width + x, y))
    for points in cells.values():
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.add_patch(Rectangle((min(xs), min(ys)), max(xs) - min(xs) + 1, max(ys) - min(ys) + 1, fill=False,
                               edgecolor="black", linewidth=1.2))
    for z in range(dims[2]):
        ax.text(z * width + dims[0] / 2, -0.6, f"z={z}", ha="center", va="center", fontsize=7)
    ax.set_xlim(-0.3, dims[2] * width - 0.7)
    ax.set_ylim(-1.1, dims[1] + 0.3)
    ax.set_xticks([])
    ax.set_yticks([])


def _host_panel(ax: Axes, state: FabricState, members: list[Accelerator],
                colour: dict[str, tuple[float, ...]]) -> None:
    """Hosts as rows (first on top), local index (= rail) as columns."""
    hosts = list(dict.fromkeys(a.host for a in members))
    width = max((a.index for a in members), default=0) + 1
    for acc in members:
        _cell(ax, acc.index, len(hosts) - 1 - hosts.index(acc.host), state, acc, colour)
    ax.set_xlim(0, width)
    ax.set_ylim(0, len(hosts))
    ax.set_xticks([i + 0.5 for i in range(width)], [str(i) for i in range(width)], fontsize=7)
    ax.set_yticks([len(hosts) - 0.5 - k for k in range(len(hosts))], hosts, fontsize=7)
    ax.set_xlabel("local index = rail", fontsize=7)
    ax.tick_params(length=0)


def _rail_lines(state: FabricState) -> list[str]:
    lines = []
    for rail in state.fabric.rails:
        line = f"{rail.id}: index {rail.index}, {rail.kind.upper()}, {rail.bandwidth_gbps:g} Gb/s"
        if rail.kind == "ocs":
            circuits = state.circuits(rail.id)
            shown = ", ".join(f"{tx}->{rx} ({state.port_owner(rail.id, tx)})" for tx, rx in sorted(circuits.items()))
            line += f", radix {rail.radix}, {len(circuits)} circuit(s)" + (f": {shown}" if shown else "")
        lines.append(line)
    return lines
