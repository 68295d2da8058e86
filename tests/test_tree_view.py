"""The playground's tree view is drawn from a Cycle event alone."""

from dflash.events import Cycle, Token
from dflash.tree_view import COLORS, ROW_PX, layout, tree_figure


def _cycle(parents, path, drafted, committed):
    return Cycle(3, len(drafted) + 1, tuple(drafted), len(path), tuple(committed), 0.0, 0.0, 0.0,
                 1.0, 10, 4, tuple(parents), tuple(path))


def test_layout_puts_parents_between_their_children():
    pos = layout((0, 0, 1, 1, 2))  # root -> 1, 2; 1 -> 3, 4; 2 -> 5
    assert pos[0][0] == 0 and pos[3][0] == pos[4][0] == pos[5][0] == 2
    assert pos[1][1] == (pos[3][1] + pos[4][1]) / 2 and pos[2][1] == pos[5][1]
    assert sorted(p[1] for n, p in pos.items() if n in (3, 4, 5)) == [0, 1, 2]


def test_figure_marks_the_accepted_path_and_the_targets_token():
    # drafted ids 10 (root child), 11 (its sibling), 12 (child of 11); accepted: 11 then 12;
    # the target then corrected to 99 (the drafter had nothing after 12)
    c = _cycle((0, 0, 2), (2, 3), (10, 11, 12),
               [Token(11, "b", "draft"), Token(12, "c", "draft"), Token(99, "!", "target", 7)])
    fig = tree_figure(c, decode=lambda i: f"t{i}", staged=5)
    by_name = {t.name: t for t in fig.data if t.name}
    assert list(by_name["accepted draft"].text) == ["t11", "t12"]
    assert list(by_name["rejected draft"].text) == ["t10"]
    assert list(by_name["staged token"].text) == ["t5"]
    target = next(t for n, t in by_name.items() if n.startswith("target's token"))
    assert "correction" in target.name and list(target.text) == ["!"]
    assert target.marker.color == COLORS["target"]
    assert "2 accepted" in fig.layout.title.text


def test_a_chain_cycle_says_so():
    c = _cycle((), (), (10, 11), [Token(10, "a", "draft")])
    assert "a chain, not a tree" in tree_figure(c, decode=str).layout.annotations[0].text


def test_dense_trees_keep_their_labels_apart():
    # 40 leaves under one node: the figure grows a row's height per leaf; labels alternate
    # above and below by depth and long ones are cut
    c = _cycle((0,) + (1,) * 40, (1,), tuple(range(10, 51)), [Token(10, "a", "draft")])
    fig = tree_figure(c, decode=lambda i: "a-very-long-token" if i == 10 else f"t{i}", staged=5)
    assert fig.layout.height >= ROW_PX * 40
    accepted = next(t for t in fig.data if t.name == "accepted draft")
    assert list(accepted.text) == ["a-very-lo…"] and list(accepted.textposition) == ["bottom center"]
    rejected = next(t for t in fig.data if t.name == "rejected draft")
    assert set(rejected.textposition) == {"top center"}


def test_copied_nodes_are_ringed():
    c = _cycle((0, 0, 2), (2, 3), (10, 11, 12), [Token(11, "b", "draft"), Token(12, "c", "draft")])
    assert not any(t.name == "copied from the context" for t in tree_figure(c, decode=str).data)
    c = Cycle(*[getattr(c, f) for f in ("index", "block_size", "drafted", "accepted", "committed", "draft_s",
                                        "verify_s", "rollback_s", "t", "total_tokens", "total_accepted",
                                        "parents", "path")], copied=(2, 3))
    pos = layout(c.parents)
    ring = next(t for t in tree_figure(c, decode=str).data if t.name == "copied from the context")
    assert list(zip(ring.x, ring.y)) == [pos[2], pos[3]]
