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
ROW_PX, LABEL_CHARS = 34, 10  # a row's height: room for a label above or below its node


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
    """A plotly figure of a tree cycle (for a chain cycle, one that says so)."""
    if not cycle.parents:
        return message_figure(f"Cycle {cycle.index + 1} verified a chain, not a tree: nothing to draw.")
    pos = layout(cycle.parents)
    rows = max(row for _, row in pos.values()) + 1
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=max(360, 120 + ROW_PX * rows),
                      margin=dict(l=10, r=10, t=80, b=10), showlegend=True,
                      legend=dict(orientation="h", y=1.0, yanchor="bottom", x=1, xanchor="right"),
                      xaxis=dict(title="depth", dtick=1), yaxis=dict(visible=False, autorange="reversed"))
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


def message_figure(text: str) -> go.Figure:
    """An empty figure that says why there is no tree to draw."""
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=160, margin=dict(l=10, r=10, t=10, b=10),
                      xaxis=dict(visible=False), yaxis=dict(visible=False),
                      annotations=[dict(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                                        font=dict(size=15, color="#475569"))])
    return fig


def _nodes(points, texts, name, color) -> go.Scatter:
    """Labels sit above nodes at even depths, below at odd ones: neighbours never share a line,
    so a label never runs into the next column's node or label (long ones are cut; hover: all)."""
    labels = [repr(t)[1:-1] for t in texts]
    return go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="markers+text",
                      name=name, text=[t if len(t) <= LABEL_CHARS else t[:LABEL_CHARS - 1] + "…" for t in labels],
                      textposition=["top center" if p[0] % 2 == 0 else "bottom center" for p in points],
                      textfont=dict(size=11), hovertext=[repr(t) for t in texts], hoverinfo="text",
                      marker=dict(size=11, color=color, line=dict(width=1, color="#334155")))
