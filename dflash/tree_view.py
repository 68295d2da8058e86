"""One tree cycle drawn from its event: the drafted tree, the accepted path, the target's token.

Reads only a `Cycle` (drafted ids, parents, path, copies, committed tokens); `decode` turns ids into
text for the labels. Depth runs left to right; siblings stack in the order the tree drew them
(most probable first), so a reader sees which alternatives the target passed over.
"""

from __future__ import annotations

from typing import Callable, Optional

import plotly.graph_objects as go

from .events import Cycle

COLORS = {"root": "#7c3aed", "accepted": "#16a34a", "rejected": "#cbd5e1", "target": "#ea580c",
          "copied": "#0f172a"}


def layout(parents: tuple[int, ...]) -> dict[int, tuple[int, float]]:
    """(depth, row) of the staged token (node 0) and each drafted node i (1-based): leaves take
    consecutive rows in depth-first order, a parent sits at its children's mean row."""
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents, 1):
        children.setdefault(p, []).append(i)
    pos: dict[int, tuple[int, float]] = {}
    next_row = 0.0

    def place(node: int, depth: int) -> float:
        nonlocal next_row
        kids = children.get(node, [])
        if kids:
            row = sum(place(k, depth + 1) for k in kids) / len(kids)
        else:
            row, next_row = next_row, next_row + 1
        pos[node] = (depth, row)
        return row

    place(0, 0)
    return pos


def tree_figure(cycle: Cycle, decode: Callable[[int], str], staged: Optional[int] = None) -> go.Figure:
    """A plotly figure of a tree cycle (an empty one, titled, for a chain cycle)."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=360, margin=dict(l=10, r=10, t=40, b=10),
                      showlegend=True, legend=dict(orientation="h", y=-0.05),
                      xaxis=dict(title="depth", dtick=1), yaxis=dict(visible=False, autorange="reversed"))
    if not cycle.parents:
        fig.update_layout(title=f"cycle {cycle.index + 1}: a chain, not a tree")
        return fig
    pos = layout(cycle.parents)
    accepted = set(cycle.path)
    last = cycle.path[-1] if cycle.path else 0
    for i, p in enumerate(cycle.parents, 1):  # edges, the accepted path drawn over the rest
        on_path = i in accepted
        fig.add_trace(go.Scatter(
            x=[pos[p][0], pos[i][0]], y=[pos[p][1], pos[i][1]], mode="lines", hoverinfo="skip",
            showlegend=False, line=dict(color=COLORS["accepted" if on_path else "rejected"],
                                        width=3 if on_path else 1)))
    groups = {"accepted": [i for i in range(1, len(cycle.parents) + 1) if i in accepted],
              "rejected": [i for i in range(1, len(cycle.parents) + 1) if i not in accepted]}
    root_text = decode(staged) if staged is not None else "staged"
    fig.add_trace(_nodes([pos[0]], [root_text], "staged token", COLORS["root"]))
    for name, nodes in groups.items():
        texts = [decode(cycle.drafted[i - 1]) for i in nodes]
        fig.add_trace(_nodes([pos[i] for i in nodes], texts, f"{name} draft", COLORS[name]))
    if cycle.copied:  # ringed: the nodes copied from earlier in the context (lookup.py)
        fig.add_trace(go.Scatter(x=[pos[i][0] for i in cycle.copied], y=[pos[i][1] for i in cycle.copied],
                                 mode="markers", name="copied from the context", hoverinfo="skip",
                                 marker=dict(size=19, symbol="circle-open", color=COLORS["copied"],
                                             line=dict(width=2))))
    if len(cycle.committed) > len(cycle.path):  # the target's own token after the path
        tok = cycle.committed[len(cycle.path)]
        d, row = pos[last]
        fig.add_trace(go.Scatter(x=[d, d + 1], y=[row, row], mode="lines", showlegend=False,
                                 hoverinfo="skip", line=dict(color=COLORS["target"], dash="dot")))
        fig.add_trace(_nodes([(d + 1, row)], [tok.text or decode(tok.id)],
                             "target's token" + (" (correction)" if tok.proposed is not None else " (bonus)"),
                             COLORS["target"]))
    fig.update_layout(title=f"cycle {cycle.index + 1}: {len(cycle.parents)} drafted nodes, "
                            f"{cycle.accepted} accepted")
    return fig


def _nodes(points, texts, name, color) -> go.Scatter:
    return go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="markers+text",
                      name=name, text=[repr(t)[1:-1][:12] for t in texts], textposition="middle right",
                      hovertext=[repr(t) for t in texts], hoverinfo="text",
                      marker=dict(size=11, color=color, line=dict(width=1, color="#334155")))
