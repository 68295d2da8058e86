"""The engine's typed event stream.

Every generation (DFlash or target-only) yields exactly one `Prefill`, then one `Cycle` per
target verify pass, then one `Summary`. The UI, the CLI's --json, the server's SSE and /metrics
are all views of these records; nothing downstream recomputes the engine's decisions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal, Optional, Union

Source = Literal["draft", "target"]


@dataclass(frozen=True)
class Token:
    """One committed token.

    source: "draft" for an accepted draft token, "target" for the target's own token (the first
    token after prefill, a correction, or the bonus token after a fully accepted block).
    proposed: at a correction, the id the drafter had proposed at this position (else None).
    text: the text this token adds to the output (streaming detokenizer; may be "" while a
    multi-byte character is incomplete, the character then arrives with a later token).
    """

    id: int
    text: str
    source: Source
    proposed: Optional[int] = None


@dataclass(frozen=True)
class Prefill:
    mode: str  # "dflash" | "target"
    prompt_tokens: int
    first: Optional[Token]  # the target's first token (None if max_tokens == 0)
    t: float  # seconds since the generation started: the prefill's wall time (TTFT)
    note: Optional[str] = None  # said once: e.g. why this run verifies a chain, not a tree
    kind: str = field(default="prefill", init=False)


@dataclass(frozen=True)
class Cycle:
    index: int  # 0-based
    block_size: int  # tokens verified by the target this cycle (1 for target-only)
    drafted: tuple[int, ...]  # draft ids offered for verification: chain d_1..d_{B-1}, or tree nodes
    accepted: int  # drafts accepted (the chain's prefix, the tree's path)
    committed: tuple[Token, ...]  # tokens emitted this cycle (after stop / max_tokens cut)
    draft_s: float
    verify_s: float
    rollback_s: float
    t: float  # seconds since the generation started, when this cycle's tokens were emitted
    total_tokens: int  # tokens emitted so far, the prefill token included
    total_accepted: int  # accepted draft tokens so far
    # tree cycles (tree.py): parents[i] is drafted[i]'s parent, 0 = the staged token, j > 0 =
    # drafted[j-1]; path = the accepted nodes root to leaf (1-based into drafted). () for chains
    parents: tuple[int, ...] = ()
    path: tuple[int, ...] = ()
    copied: tuple[int, ...] = ()  # the drafted nodes that copy earlier context (lookup.py), root down
    kind: str = field(default="cycle", init=False)


@dataclass(frozen=True)
class Summary:
    mode: str
    block_size: int
    token_ids: tuple[int, ...]  # generated ids (prompt excluded)
    text: str
    tokens: int
    cycles: int
    tau: float  # committed tokens / verify cycles (docs/algorithm.md: Events and metrics); 1.0 for target-only
    acceptance_rate: float  # accepted drafts / drafts offered (0.0 for target-only)
    acceptance_lengths: tuple[int, ...]  # accepted drafts per cycle
    per_position_acceptance: tuple[float, ...]  # [i]: cycles whose first i+1 drafts accepted / cycles
    prompt_tokens: int
    ttft_s: float  # the prefill's wall time: the first token is emitted at its end
    decode_s: float  # first token to last token
    decode_tok_s: float  # tokens after the first / decode_s
    draft_s: float
    verify_s: float
    rollback_s: float
    finish_reason: str  # "stop" | "length" | "cancelled"
    verify: str = ""  # how drafts were verified: "tree 8", "tree auto", "chain 5", "chain auto"
    kind: str = field(default="summary", init=False)


Event = Union[Prefill, Cycle, Summary]


def to_dict(event: Event) -> dict:
    """JSON-ready dict of an event (tuples become lists)."""
    return asdict(event)
