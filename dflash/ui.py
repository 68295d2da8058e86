"""Views of the engine's events for the playground: token panes, metrics, verdict and charts.

Everything here is a pure function of the events (`Prefill`, `Cycle`, `Summary`) of a run; nothing
here touches MLX or a model. Numbers shown at the end come from the `Summary`; while a run is
streaming they come from its `Cycle` events (the engine's own decisions and timestamps).
"""

from __future__ import annotations

import html
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import plotly.graph_objects as go

from .events import Cycle, Prefill, Summary, Token
from .verdict import first_divergence

Decode = Callable[[int], str]

# token kind -> (css colour, legend label, hover / legend explanation)
KINDS = {
    "draft": ("#bbf7d0", "accepted draft", "drafted and accepted by the target"),
    "copied": ("#99f6e4", "accepted copy", "copied from earlier in the context and accepted by the target"),
    "correction": ("#fecaca", "correction", "the target's token where it rejected the draft (hover or tap: the draft)"),
    "bonus": ("#bfdbfe", "bonus", "the target's extra token after a fully accepted block"),
    "first": ("#e9d5ff", "first token", "the target's token at the end of prefill"),
}
LABELS = {"target": "Target only", "dflash": "DFlash"}
FINISH = {"stop": "end of text", "length": "max tokens", "cancelled": "stopped"}
LINE_COLORS = {"target": "#64748b", "dflash": "#16a34a"}
BUSY_LOAD = 0.5  # load average per core before a race above which other work competes for the CPU
NOISY_STEPS = 1.5  # target-only steps whose p90 exceeds the median by this: the clock was disturbed

CSS = """
.tokens { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, SFMono-Regular,
  Menlo, Consolas, monospace; font-size: 13.5px; line-height: 1.65; margin: 0; padding: 10px 12px;
  min-height: 180px; background: var(--background-fill-primary); border: 1px solid
  var(--border-color-primary); border-radius: 8px; }
.tk { border-radius: 3px; box-decoration-break: clone; -webkit-box-decoration-break: clone;
  box-shadow: inset -1px 0 0 rgba(15, 23, 42, 0.18); }
""" + "".join(f".tk-{k} {{ background: {c[0]}; color: #111827; }}\n" for k, c in KINDS.items()) + """
.tk-correction { cursor: help; border-bottom: 2px solid #ef4444; position: relative; }
.tk[data-tip]:hover::after, .tk[data-tip]:focus::after { content: attr(data-tip); position: absolute;
  left: 0; top: calc(100% + 4px); z-index: 20; white-space: pre; padding: 6px 9px; border-radius: 6px;
  background: #1e293b; color: #f8fafc; font-size: 12.5px; line-height: 1.5; box-shadow: 0 4px 14px
  rgba(15, 23, 42, 0.3); pointer-events: none; }
.tk[data-tip]:focus { outline: 2px solid #ef4444; }
.tokens, .pane { overflow: visible !important; }
.tk-target { box-shadow: none; }
.pane-head { display: flex; align-items: baseline; gap: 12px; flex-wrap: wrap; margin: 2px 0 6px; }
.pane-head b { font-size: 16px; }
.pane-head .stat { color: var(--body-text-color-subdued); font-size: 13px; }
.pane-head .speed { font-size: 15px; font-weight: 600; color: var(--body-text-color); }
.legend { display: flex; gap: 10px; flex-wrap: wrap; font-size: 12.5px; margin-bottom: 6px; }
.legend span.tk { padding: 1px 6px; }
.legend .stat { color: var(--body-text-color-subdued); padding: 1px 0; }
.verdict { padding: 10px 14px; border-radius: 8px; font-size: 15px; }
.verdict.same { background: #dcfce7; color: #14532d; }
.verdict.diff { background: #fef3c7; color: #78350f; }
.verdict.none { background: var(--background-fill-secondary); color: var(--body-text-color-subdued); }
.metrics, .metrics tr { border: none !important; }
.metrics { width: 100%; border-collapse: collapse; font-size: 14px; }
.metrics th, .metrics td { padding: 5px 10px; text-align: right; border: none !important;
  border-bottom: 1px solid var(--border-color-primary) !important; background: none !important; }
.metrics small { color: var(--body-text-color-subdued); }
.metrics th:first-child, .metrics td:first-child { text-align: left; color: var(--body-text-color-subdued); }
.metrics .big { font-weight: 700; font-size: 16px; }
.metrics td.trust { text-align: left; font-size: 13px; }
.busy { color: #92400e; font-weight: 600; }
"""


@dataclass
class Run:
    """The events of one generation, as they arrive."""

    mode: str  # "target" | "dflash"
    prefill: Optional[Prefill] = None
    cycles: list[Cycle] = field(default_factory=list)
    summary: Optional[Summary] = None

    def add(self, event) -> None:
        if isinstance(event, Prefill):
            self.prefill = event
        elif isinstance(event, Cycle):
            self.cycles.append(event)
        elif isinstance(event, Summary):
            self.summary = event

    def tokens(self) -> list[tuple[Token, str]]:
        """Every committed token with its kind: first | draft | copied | correction | bonus | target."""
        out = [(self.prefill.first, "first")] if self.prefill and self.prefill.first else []
        for c in self.cycles:
            out += zip(c.committed, self.kinds(c))
        return out

    def kinds(self, c: Cycle) -> list[str]:
        """The kind of each token cycle `c` committed (a tree's path is committed in order)."""
        return ["copied" if j < len(c.path) and c.path[j] in c.copied else token_kind(t, self.mode)
                for j, t in enumerate(c.committed)]

    @property
    def n_tokens(self) -> int:
        if self.cycles:
            return self.cycles[-1].total_tokens
        return int(bool(self.prefill and self.prefill.first))

    def tok_s(self) -> Optional[float]:
        """Decode tok/s: the Summary's at the end; while streaming, tokens after the first over
        the time since it (both from the events' timestamps)."""
        if self.summary:
            return self.summary.decode_tok_s
        if self.prefill and self.cycles and self.cycles[-1].t > self.prefill.t:
            return (self.cycles[-1].total_tokens - 1) / (self.cycles[-1].t - self.prefill.t)
        return None

    def acceptance_lengths(self) -> tuple[int, ...]:
        if self.summary:
            return self.summary.acceptance_lengths
        return tuple(c.accepted for c in self.cycles)

    def block_size(self) -> int:
        """The largest block used: the engine's B at the end, while streaming the cycles' own."""
        return self.summary.block_size if self.summary else max(map(block_used, self.cycles), default=0)


def block_used(c: Cycle) -> int:
    """The most tokens cycle `c` could commit: a chain's verified block, a tree's depth + 1."""
    if not c.parents:
        return c.block_size
    depth = [0]
    for p in c.parents:
        depth.append(depth[p] + 1)
    return max(depth) + 1


@dataclass
class Race:
    """One recorded race, a history entry: both runs and what they ran with. Every view of it
    (the final frame, a replay, the copied results) reads only this."""

    target: Run
    dflash: Run
    prompt: str
    settings: dict  # the GenerationConfig's fields (mode aside) and the chat template switch
    pair: str  # the model pair's label
    machine: str
    texts: dict[int, str] = field(default_factory=dict)  # text of the token ids a view names
    divergence: Optional[int] = None
    margin: Optional[float] = None
    stopped: bool = False
    load: tuple[float, ...] = ()  # the host's 1-minute load average as the race began and ended
    cores: int = 0

    @property
    def runs(self) -> list[Run]:
        return [self.target, self.dflash]

    def decode(self, token_id: int) -> str:
        return self.texts.get(token_id, f"id {token_id}")

    def speedup(self) -> Optional[float]:
        t, d = self.target.summary, self.dflash.summary
        return d.decode_tok_s / t.decode_tok_s if t and d and t.decode_tok_s > 0 else None

    def trust(self) -> tuple[str, bool]:
        """How far to trust the speed numbers, from what was measured: the host's load around
        the race and the spread of the target-only steps. busy: a rerun may well differ."""
        parts, busy = [], False
        if self.load and self.cores:
            parts.append(f"host load {self.load[0]:.1f} → {self.load[-1]:.1f} on {plural(self.cores, 'core')}")
            busy = self.load[0] >= BUSY_LOAD * self.cores
        steps = sorted(c.verify_s for c in self.target.cycles)
        if len(steps) >= 5:
            mid, p90 = steps[len(steps) // 2], steps[int(0.9 * (len(steps) - 1))]
            parts.append(f"target-only step {seconds(mid)} (p90 {seconds(p90)})")
            busy = busy or p90 > NOISY_STEPS * mid
        return "; ".join(parts), busy

    def data(self) -> dict:
        """The raw summaries, as the engine reported them."""
        return {"target": self.target.summary and asdict(self.target.summary),
                "dflash": self.dflash.summary and asdict(self.dflash.summary),
                "first_divergence": self.divergence, "logit_margin": self.margin}


def named_ids(race: Race) -> set[int]:
    """Token ids whose text a view shows apart from the panes: drafts rejected at a correction
    (hover text), the nodes of drafted trees (the tree view) and the tokens where the runs first
    differ."""
    ids = {tok.proposed for run in race.runs for c in run.cycles for tok in c.committed if tok.proposed is not None}
    ids |= {i for c in race.dflash.cycles if c.parents for i in c.drafted}
    ids |= {c.committed[-1].id for c in race.dflash.cycles if c.committed}  # staged tokens
    if race.dflash.prefill and race.dflash.prefill.first:
        ids.add(race.dflash.prefill.first.id)
    if race.divergence is not None:
        ids |= {s.token_ids[race.divergence] for s in (race.target.summary, race.dflash.summary)
                if s and race.divergence < len(s.token_ids)}
    return ids


def token_kind(t: Token, mode: str) -> str:
    if t.source == "draft":
        return "draft"
    if mode != "dflash":
        return "target"
    # the engine sets `proposed` only where it rejected a draft; otherwise the block was all accepted
    return "correction" if t.proposed is not None else "bonus"


# ---- token panes -----------------------------------------------------------------------------

def tokens_html(run: Run, decode: Optional[Decode] = None) -> str:
    """The run's text as escaped per-token spans in a whitespace-preserving <pre>."""
    spans = []
    for tok, kind in run.tokens():  # tok.text is "" inside a multi-byte character: an empty span
        card = ""
        if kind == "correction":  # a CSS hover card; tabindex: a tap focuses it on touch screens
            drafted = shown(decode(tok.proposed)) if decode else f"id {tok.proposed}"
            tip = f"drafter proposed {drafted}\ntarget chose {shown(tok.text)}"
            card = f' tabindex="0" data-tip="{html.escape(tip)}"'
        spans.append(f'<span class="tk tk-{kind}"{card}>{html.escape(tok.text, quote=False)}</span>')
    return f'<pre class="tokens">{"".join(spans)}</pre>'


def shown(text: str) -> str:
    """A token as a reader sees it in a hover card: quoted, whitespace made visible."""
    return "“" + text.replace("\n", "↵").replace("\t", "⇥") + "”"


def legend_html(mode: str = "dflash") -> str:
    kinds = KINDS if mode == "dflash" else {"first": KINDS["first"]}
    items = "".join(f'<span class="tk tk-{k}" title="{html.escape(c[2])}">{c[1]}</span>'
                    for k, c in kinds.items())
    if mode != "dflash":
        items += '<span class="stat">then plain decoding: one target pass per token</span>'
    return f'<div class="legend">{items}</div>'


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def pane_state(run: Run, stopped: bool = False) -> str:
    """What a pane says after its title: how the run is going, or how it ended."""
    if run.summary:
        return FINISH.get(run.summary.finish_reason, run.summary.finish_reason)
    if stopped:
        return "stopped" if run.prefill else "not run: stopped"
    return "generating…" if run.prefill else "prefill…"


def pane_html(run: Optional[Run], mode: str, decode: Optional[Decode] = None, state: str = "") -> str:
    """A pane: title, live speed and counts, (legend), then the coloured text."""
    stats = []
    if run is not None:
        tok_s = run.tok_s()
        stats.append(f'<span class="speed">{tok_s:.1f} tok/s</span>' if tok_s is not None
                     else '<span class="speed">– tok/s</span>')
        stats.append(f'<span class="stat">{plural(run.n_tokens, "token")}</span>')
        if run.prefill:
            stats.append(f'<span class="stat">TTFT {seconds(run.prefill.t)}</span>')
        if mode == "dflash" and run.cycles:
            lengths = run.acceptance_lengths()
            stats.append(f'<span class="stat">τ {1 + sum(lengths) / len(lengths):.2f}</span>')
    if state:
        stats.append(f'<span class="stat">{html.escape(state)}</span>')
    head = f'<div class="pane-head"><b>{LABELS[mode]}</b>{"".join(stats)}</div>'
    legend = legend_html(mode)
    body = tokens_html(run, decode) if run is not None else '<pre class="tokens"></pre>'
    return f'<div class="pane pane-{mode}">{head}{legend}{body}</div>'


# ---- metrics and verdict ---------------------------------------------------------------------

def metrics_html(target: Optional[Summary], dflash: Optional[Summary], trust: tuple[str, bool] = ("", False)) -> str:
    """Side-by-side numbers of both runs, all read from their Summary events; `trust`: the
    race's measurements of how noisy its speeds are (`Race.trust`)."""
    def cell(s, fmt):
        return fmt(s) if s is not None else "–"

    def split(s):
        total = s.draft_s + s.verify_s + s.rollback_s
        if s.mode != "dflash" or total <= 0:
            return f"– / {s.verify_s:.2f} s / –"
        parts = (s.draft_s, s.verify_s, s.rollback_s)
        return (" / ".join(f"{x:.2f}" for x in parts) + " s<br><small>"
                + " / ".join(f"{x / total:.0%}" for x in parts) + "</small>")

    speedup = "–"
    if target and dflash and target.decode_tok_s > 0:
        speedup = f'<span class="big">{dflash.decode_tok_s / target.decode_tok_s:.2f}×</span>'
    rows = [
        ("Decode speed", lambda s: f'<span class="big">{s.decode_tok_s:.1f} tok/s</span>'),
        ("Speedup", None),
        ("Generated tokens", lambda s: f"{s.tokens}"),
        ("Time to first token", lambda s: seconds(s.ttft_s)),
        ("Prompt tokens", lambda s: f"{s.prompt_tokens}"),
        ("Target passes (cycles)", lambda s: f"{s.cycles}"),
        ("τ: tokens per cycle", lambda s: f"{s.tau:.2f}"),
        ("Drafted tokens accepted", acceptance),
        ("Draft / verify / rollback", split),
        ("Finish", lambda s: FINISH.get(s.finish_reason, s.finish_reason)),
    ]
    body = "".join(f"<tr><td>{name}</td><td>{cell(target, f) if f else ''}</td>"
                   f"<td>{cell(dflash, f) if f else speedup}</td></tr>" for name, f in rows)
    measured, busy = trust
    if measured:
        note = '<br><span class="busy">Busy host: the speeds are noisy, run again.</span>' if busy else ""
        body += f'<tr><td>Measured with</td><td class="trust" colspan="2">{measured}{note}</td></tr>'
    return (f'<table class="metrics"><tr><th></th><th>{LABELS["target"]}</th><th>{LABELS["dflash"]}</th>'
            f"</tr>{body}</table>")


def acceptance(s: Summary) -> str:
    """The engine's acceptance rate, saying what it counts: a tree offers every node, most of
    them alternatives, so it is low even when each cycle accepts many."""
    if s.mode != "dflash":
        return "–"
    per = "tree node" if s.verify.startswith("tree") else "drafted token"
    return f"{s.acceptance_rate:.0%}<br><small>of every {per} offered</small>"


def seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def verdict_html(target: Optional[Summary], dflash: Optional[Summary], decode: Optional[Decode] = None,
                 margin: Optional[float] = None, temperature: float = 0.0, stopped: bool = False) -> str:
    """Identical outputs, or where they first differ (and the target's logit margin there). A
    stopped race compares the tokens both runs produced."""
    stopped = stopped or any(s is not None and s.finish_reason == "cancelled" for s in (target, dflash))
    if stopped and not (target and target.tokens and dflash and dflash.tokens):
        which = "DFlash" if target and target.tokens else "both runs"
        return f'<div class="verdict none">■ Stopped before {which} had produced tokens: no verdict.</div>'
    if target is None or dflash is None:
        return '<div class="verdict none">The verdict appears when both runs are done.</div>'
    a, b = target.token_ids, dflash.token_ids
    n = min(len(a), len(b)) if stopped else max(len(a), len(b))
    i = first_divergence(a[:n], b[:n])
    if i is None and stopped:
        return (f'<div class="verdict same">■ Stopped: the first {plural(n, "token")} of both runs are '
                f"identical (the rest was not generated).</div>")
    if i is None:
        return (f'<div class="verdict same">✓ <b>Outputs identical</b>: all {len(a)} tokens of DFlash '
                f"are the target's own.</div>")
    def show(ids):
        if i >= len(ids):
            return "(end)"
        return f"{decode(ids[i])!r} (id {ids[i]})" if decode else f"id {ids[i]}"
    where = (f"<b>First divergence at token {i}</b>: target-only {html.escape(show(a))}, "
             f"DFlash {html.escape(show(b))}.")
    if temperature > 0:
        return (f'<div class="verdict none">Sampling at temperature {temperature:g}: each run draws its own '
                f"sample from the target's distribution, so they need not match. {where}</div>")
    if margin is not None:
        tie = "a near-tie, so numeric noise can flip it" if margin < 0.05 else "not a tie"
        where += f" The target's top-1 minus top-2 logit there: <b>{margin:.4f}</b> ({tie})."
    return f'<div class="verdict diff">✗ {where}</div>'


def race_views(race: Race) -> dict:
    """Every output of a finished (or stopped) race, by output name: the live run's last frame
    and a replay's last frame are this, so they cannot differ."""
    t, d = race.target, race.dflash
    verdict = verdict_html(t.summary, d.summary, race.decode, race.margin, race.settings.get("temperature", 0.0),
                           race.stopped)
    charts = [f(d) if d.cycles else None for f in (cycles_chart, acceptance_histogram, position_chart)]
    return dict(target=pane_html(t, "target", race.decode, pane_state(t, race.stopped)),
                dflash=pane_html(d, "dflash", race.decode, pane_state(d, race.stopped)),
                verdict=verdict, metrics=metrics_html(t.summary, d.summary, race.trust()), race=race_chart(race.runs),
                cycles=charts[0], hist=charts[1], pos=charts[2], data=race.data())


def results_markdown(race: Race) -> str:
    """The race's summary for a slide or an issue comment (the raw JSON stays in `Race.data`)."""
    t, d = race.target.summary, race.dflash.summary
    speedup = race.speedup()
    head = f"{speedup:.2f}× the target-only decode speed" if speedup else "partial results"
    rows = [("Decode speed", lambda s: f"{s.decode_tok_s:.1f} tok/s"),
            ("Generated tokens", lambda s: str(s.tokens)),
            ("τ: tokens per target pass", lambda s: f"{s.tau:.2f}"),
            ("Drafted tokens accepted", lambda s: f"{s.acceptance_rate:.0%}" if s.mode == "dflash" else "–"),
            ("Time to first token", lambda s: seconds(s.ttft_s)),
            ("Finish", lambda s: FINISH.get(s.finish_reason, s.finish_reason))]
    table = [f"| | {LABELS['target']} | {LABELS['dflash']} |", "|---|---:|---:|"]
    table += [f"| {name} | {f(t) if t else '–'} | {f(d) if d else '–'} |" for name, f in rows]
    if race.stopped:
        outcome = "Stopped before the end: partial runs."
    elif race.divergence is None:
        outcome = "Outputs identical: every DFlash token is the target's own."
    else:
        outcome = f"Outputs differ from token {race.divergence}."
    measured, busy = race.trust()
    if measured:
        outcome += f" Measured with {measured}" + (" (a busy host: noisy speeds)." if busy else ".")
    settings = ", ".join(f"{k} {v}" for k, v in race.settings.items())
    prompt = race.prompt if len(race.prompt) <= 300 else race.prompt[:300] + "…"
    return "\n".join([f"**DFlash playground**: {head}", "", f"{race.pair} on {race.machine}", "", *table, "",
                      outcome, "", f"Settings: {settings}.", "", "> " + prompt.replace("\n", "\n> ")])


# ---- charts ----------------------------------------------------------------------------------
# Built as plain dicts and wrapped without plotly's validation, which costs ~20 ms a figure: these
# are rebuilt while a run streams, on the CPU the timed run is using.

_TEMPLATE = None


def _figure(traces: list[dict], title: str, x: str, y: str, **layout) -> go.Figure:
    global _TEMPLATE
    if _TEMPLATE is None:
        import plotly.io as pio

        _TEMPLATE = pio.templates["plotly_white"].to_plotly_json()
    base = dict(
        title=dict(text=title, x=0.02, font=dict(size=14)), template=_TEMPLATE, height=300,
        margin=dict(l=55, r=15, t=60, b=45), bargap=0.15,
        legend=dict(orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom", font=dict(size=11)),
        xaxis=dict(title=dict(text=x), **layout.pop("xaxis", {})),
        yaxis=dict(title=dict(text=y), **layout.pop("yaxis", {})))
    return go.Figure(dict(data=traces, layout={**base, **layout}), _validate=False)


def _count_axis(top: float) -> dict:
    """Whole-number ticks for a count (left alone, plotly ticks a short range at 0.5, 1.5...)."""
    step = next(m * 10**e for e in range(18) for m in (1, 2, 5) if top <= 8 * m * 10**e)
    return dict(dtick=step, tick0=0, rangemode="tozero")


def race_chart(runs: list[Run], clock: Optional[float] = None) -> go.Figure:
    """Tokens emitted vs seconds since each run started: both runs on one clock. With `clock`
    (a replay), a cursor at that time and each run's marker where it stood then."""
    traces, top = [], 1
    for run in runs:
        if not run.prefill:
            continue
        t = [0.0, run.prefill.t] + [c.t for c in run.cycles]
        n = [0, int(run.prefill.first is not None)] + [c.total_tokens for c in run.cycles]
        k = len(t) if clock is None else bisect_right(t, clock)
        tok_s, color, top = run.tok_s(), LINE_COLORS[run.mode], max(top, n[-1])
        traces.append(dict(type="scatter", x=t, y=n, mode="lines", line=dict(color=color, width=2.5, shape="hv"),
                           name=LABELS[run.mode] + (f" ({tok_s:.1f} tok/s)" if tok_s else "")))
        traces.append(dict(type="scatter", x=[t[k - 1]], y=[n[k - 1]], mode="markers", showlegend=False,
                           hoverinfo="skip", marker=dict(color=color, size=9)))
    cursor = [] if clock is None else [dict(type="line", yref="paper", x0=clock, x1=clock, y0=0, y1=1,
                                            line=dict(color="#f59e0b", width=2))]
    return _figure(traces, "Race: tokens over time", "seconds since the run started", "tokens",
                   shapes=cursor, yaxis=_count_axis(top))


def cycles_chart(run: Run) -> go.Figure:
    """Committed tokens per verify cycle by kind, under the block each cycle used (a chain's
    verified block, a tree's depth + 1: the most it could commit)."""
    x = [c.index + 1 for c in run.cycles]
    kinds = [run.kinds(c) for c in run.cycles]
    present = [k for k in ("draft", "copied", "correction", "bonus") if k != "copied" or any(c.copied for c in run.cycles)]
    traces = [dict(type="bar", x=x, name=KINDS[kind][1], marker=dict(color=KINDS[kind][0],
                   line=dict(color="#475569", width=0.3)), y=[ks.count(kind) for ks in kinds])
              for kind in present]
    used = [block_used(c) for c in run.cycles]
    if used:  # a step per cycle: adaptive chains and trees change it
        traces.append(dict(type="scatter", x=x, y=used, mode="lines", name="block used", hoverinfo="x+y",
                           line=dict(color="#64748b", dash="dot", shape="hvh", width=1.5)))
    top = max(used + [len(c.committed) for c in run.cycles], default=1)
    return _figure(traces, "Committed tokens per cycle", "cycle", "tokens", barmode="stack",
                   xaxis=dict(dtick=_count_axis(len(x))["dtick"]), yaxis=_count_axis(top),
                   height=340, margin=dict(l=55, r=15, t=40, b=95),  # five entries: the legend goes below
                   legend=dict(orientation="h", x=0, y=-0.3, yanchor="top", traceorder="normal", font=dict(size=11)))


def acceptance_histogram(run: Run) -> go.Figure:
    """How many drafts each cycle kept (0 .. block size - 1)."""
    lengths, B = run.acceptance_lengths(), max(run.block_size(), 2)
    counts = [sum(a == k for a in lengths) for k in range(B)]
    bar = dict(type="bar", x=list(range(B)), y=counts, marker=dict(color="#4ade80", line=dict(color="#15803d", width=0.6)))
    title = "Acceptance length per cycle"
    if lengths:
        title += f" (τ = {1 + sum(lengths) / len(lengths):.2f})"
    return _figure([bar], title, "accepted drafts in the cycle", "cycles", xaxis=dict(dtick=1),
                   yaxis=_count_axis(max(counts)))


def position_chart(run: Run) -> go.Figure:
    """Per draft position i: the share of cycles whose first i drafts were all accepted."""
    if run.summary:
        rates = run.summary.per_position_acceptance
    else:
        lengths, B = run.acceptance_lengths(), run.block_size()
        rates = tuple(sum(a > i for a in lengths) / len(lengths) for i in range(B - 1)) if lengths else ()
    bar = dict(type="bar", x=list(range(1, len(rates) + 1)), y=list(rates),
               marker=dict(color="#60a5fa", line=dict(color="#1d4ed8", width=0.6)))
    return _figure([bar], "Acceptance rate by draft position", "draft position in the block",
                   "cycles reaching it", yaxis=dict(range=[0, 1], tickformat=".0%"), xaxis=dict(dtick=1))


def tree_cycle(race: Race, number: Optional[int] = None) -> tuple[Optional[Cycle], Optional[int]]:
    """(cycle, its staged token) for the tree view: cycle `number` (1-based) of the DFlash run,
    or by default the tree cycle that accepted most, a passed-over sibling on its path first."""
    run = race.dflash
    trees = [c for c in run.cycles if c.parents]
    if number is None:
        if not trees:
            return None, None

        def took_sibling(c):
            first = {}
            for i, p in enumerate(c.parents, 1):
                first.setdefault(p, i)
            return any(first[c.parents[b - 1]] != b for b in c.path)

        cycle = max(trees, key=lambda c: (took_sibling(c), c.accepted, -c.index))
    elif 1 <= number <= len(run.cycles):
        cycle = run.cycles[number - 1]
    else:
        return None, None
    before = run.cycles[cycle.index - 1].committed if cycle.index else ()
    staged = before[-1].id if before else (run.prefill.first.id if run.prefill and run.prefill.first else None)
    return cycle, staged
