"""The drafter's Markov head: absent it changes nothing, a new one is zero, it saves and loads,
`chain` follows it, and training moves only the head (or, joint, the base with it)."""

import json

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from dflash import train as T
from dflash.drafter import DraftVocab, MarkovHead, load_drafter, save_drafter
from dflash.load import check_pair
from dflash.target import Target
from dflash.train.markov import with_head
from tests.test_train import cfg_for
from tests.tiny import VOCAB, FakeTokenizer, tiny_drafter, tiny_model

SUBSET = [5, 9, 3, 40, 17, 22, 8, 60, 33, 12, 41, 7]  # a draft vocabulary (frequency order)


def setup_pair(vocab=None):
    target = Target(tiny_model("llama"), "llama", [0, 2])
    drafter = tiny_drafter()
    drafter.vocab = vocab and DraftVocab(vocab)
    cache = drafter.make_cache()
    _, feats, _ = target.forward(mx.array([[5, 6, 7, 8, 9]]), target.make_cache())
    drafter.extend_context(feats, cache)
    return target, drafter, cache


def random_head(drafter, rank=4, seed=3):
    with_head(drafter, rank)
    mx.random.seed(seed)
    w = drafter.markov.out_proj.weight
    drafter.markov.out_proj.weight = mx.random.normal(w.shape) * 10.0
    return drafter


def test_no_head_is_todays_drafter(tmp_path):
    """A drafter without a head has no head weights or config key (z-lab's layout), and its chain
    is the argmax of its proposals."""
    target, drafter, cache = setup_pair()
    assert not drafter.has_markov and drafter.head_rows is None
    assert not any(k.startswith("markov.") for k, _ in tree_flatten(drafter.parameters()))
    save_drafter(drafter, tmp_path)
    assert "markov_rank" not in json.loads((tmp_path / "config.json").read_text())["dflash_config"]
    assert not load_drafter(tmp_path).has_markov
    base = drafter.propose(target, 7, 6, cache)
    np.testing.assert_array_equal(np.array(drafter.chain(target, 7, 6, cache)),
                                  np.array(mx.argmax(base, -1)))


@pytest.mark.parametrize("vocab", [None, SUBSET])
def test_new_head_is_zero_and_keeps_the_chain(vocab):
    target, drafter, cache = setup_pair(vocab)
    base = drafter.propose(target, 7, 6, cache)
    with_head(drafter, 4)
    assert drafter.head_rows == (len(vocab) if vocab else VOCAB)
    bias = drafter.transition_bias(target, mx.array([7, 1, 40]))
    assert bias.shape == (3, VOCAB) and not bias.any().item()
    np.testing.assert_array_equal(np.array(drafter.propose(target, 7, 6, cache)), np.array(base))
    np.testing.assert_array_equal(np.array(drafter.chain(target, 7, 6, cache)),
                                  np.array(mx.argmax(base, -1)))


def test_bias_and_chain_follow_the_head():
    """transition_bias is out_proj(in_proj(E[prev])) on the draft vocabulary's ids (0 elsewhere);
    chain takes position 1's base argmax (it saw the staged token), then each position's argmax
    after the bias of the token chosen before it."""
    target, drafter, cache = setup_pair(SUBSET)
    random_head(drafter)
    prev = mx.array([7, 40])
    bias = np.array(drafter.transition_bias(target, prev))
    sub = np.array(drafter.markov(target.embed(prev)))
    np.testing.assert_allclose(bias[:, SUBSET], sub, rtol=1e-6)
    assert not np.delete(bias, SUBSET, axis=1).any()

    base = np.array(drafter.propose(target, 7, 6, cache))
    want = [int(np.argmax(base[0]))]
    for j in range(1, 5):
        bias = np.array(drafter.transition_bias(target, mx.array([want[-1]])))[0]
        want.append(int(np.argmax(base[j] + bias)))
    got = drafter.chain(target, 7, 6, cache).tolist()
    assert got == want and set(got) <= set(SUBSET)
    assert got != np.argmax(base, -1).tolist()  # the head changed the chain (else the test is moot)


def test_save_load_round_trip(tmp_path):
    """A drafter with a head (and a draft vocabulary) saves and loads exactly, passes the pair
    check, and a head that does not fit its vocabulary is refused."""
    target, drafter, _ = setup_pair(SUBSET)
    random_head(drafter)
    save_drafter(drafter, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["dflash_config"]["markov_rank"] == 4
    back = load_drafter(tmp_path)
    check_pair(target, back)
    assert back.has_markov and back.head_rows == len(SUBSET)
    a, b = dict(tree_flatten(drafter.parameters())), dict(tree_flatten(back.parameters()))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(np.array(a[k]), np.array(b[k]), err_msg=k)
    (tmp_path / "draft_vocab.npy").unlink()  # the head's rows no longer match the vocabulary
    with pytest.raises(ValueError, match="do not match"):
        load_drafter(tmp_path)


def test_bad_rank_in_config(tmp_path):
    target, drafter, _ = setup_pair()
    save_drafter(drafter, tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["dflash_config"]["markov_rank"] = "64"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="markov_rank must be"):
        load_drafter(tmp_path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny drafter trained as usual (with a draft vocabulary), then 20 steps of --markov-rank."""
    tmp = tmp_path_factory.mktemp("markov")
    model, tok = tiny_model("llama"), FakeTokenizer()
    prompts = [("a", "hello there"), ("b", "what is up"), ("a", "tell me more"), ("b", "x"),
               ("a", "abc def"), ("b", "qrs tuv wxy"), ("a", "one two"), ("b", "zzz")] * 2
    ds = T.generate_data(model, tok, prompts, tmp / "data.npz", max_new_tokens=24, batch_size=8,
                         progress=lambda s: None)
    T.train(Target(model, "llama", []), tok, ds, cfg_for(tmp / "base", steps=10, draft_vocab=40),
            progress=lambda s: None)
    cfg = cfg_for(tmp / "head", init=str(tmp / "base"), markov_rank=8, steps=20, lr=1e-2)
    T.train(Target(model, "llama", []), tok, ds, cfg, progress=lambda s: None)
    return tmp, model, tok, ds


def test_training_moves_only_the_head(trained):
    tmp, *_ = trained
    log = [json.loads(l) for l in (tmp / "head" / T.LOG_FILE).read_text().splitlines()]
    losses = [r["loss"] for r in log if "split" not in r]
    assert losses[-1] < losses[0]
    val = [r for r in log if r.get("split") == "val"]
    assert val[0]["step"] == 0 and val[0]["after_sibling_head"] == val[0]["after_sibling_base"]
    base, head = load_drafter(tmp / "base"), load_drafter(tmp / "head")
    assert head.has_markov and head.head_rows == len(base.vocab.ids)
    np.testing.assert_array_equal(head.vocab.ids, base.vocab.ids)
    a, b = dict(tree_flatten(base.parameters())), dict(tree_flatten(head.parameters()))
    assert set(b) - set(a) == {"markov.in_proj.weight", "markov.out_proj.weight"}
    for k in a:  # bitwise: the base never moved
        assert np.array(a[k]).tobytes() == np.array(b[k]).tobytes(), k
    assert head.markov.out_proj.weight.abs().max().item() > 0


def test_step_zero_is_the_base_drafter(trained):
    """The loss of the head-to-be at step 0 (head zero) equals the base drafter's on the same
    batch over the same vocabulary; the trained head lowers it."""
    tmp, model, tok, ds = trained
    target = Target(model, "llama", [0, 2])
    io = T.FrozenIO(target)
    b = T.sample_blocks(ds, np.arange(8), np.random.default_rng(0), 64, 8, 4, VOCAB - 1, 0)
    batch = [T.target_features(target, mx.array(b["ids"]))] + [mx.array(b[k]) for k in T.BLOCK_KEYS]
    w = T.position_weights(8, 7.0)
    base = load_drafter(tmp / "base", dtype=mx.float32)
    zero = with_head(load_drafter(tmp / "base", dtype=mx.float32), 8)
    trained_head = load_drafter(tmp / "head", dtype=mx.float32)
    l_zero, _ = T.block_loss(zero, io, *batch, weights=w)
    from dflash.train.markov import masked

    h = T.drafter_forward(base, io, batch[0], batch[1], batch[4], batch[5])
    logits, valid = masked(base, io.logits(h[:, 1:]), batch[2], batch[3])
    import mlx.nn as nn

    ce = nn.losses.cross_entropy(logits, batch[2], reduction="none")
    wv = w[None] * valid
    assert l_zero.item() == pytest.approx(((ce * wv).sum() / wv.sum()).item(), rel=1e-6)
    l_head, _ = T.block_loss(trained_head, io, *batch, weights=w)
    assert l_head.item() < l_zero.item()


def test_resume_keeps_the_head(trained, tmp_path):
    tmp, model, tok, ds = trained
    cfg = cfg_for(tmp / "head", init=str(tmp / "base"), markov_rank=8, steps=25, lr=1e-2)
    T.train(Target(model, "llama", []), tok, ds, cfg, resume=True, progress=lambda s: None)
    d = load_drafter(tmp / "head")
    assert d.head_rows == len(d.vocab.ids)


def test_joint_training_moves_base_and_head(trained):
    """--markov-joint: from a drafter with a head, the base's layers train too (dropout allowed);
    the vocabulary stays and the result loads with its head."""
    tmp, model, tok, ds = trained
    cfg = cfg_for(tmp / "joint", init=str(tmp / "head"), markov_rank=8, markov_joint=True,
                  steps=10, lr=1e-2, dropout=0.1)
    T.train(Target(model, "llama", []), tok, ds, cfg, progress=lambda s: None)
    head, joint = load_drafter(tmp / "head"), load_drafter(tmp / "joint")
    np.testing.assert_array_equal(joint.vocab.ids, head.vocab.ids)
    a, b = dict(tree_flatten(head.parameters())), dict(tree_flatten(joint.parameters()))
    assert set(a) == set(b)
    moved = {k for k in a if np.array(a[k]).tobytes() != np.array(b[k]).tobytes()}
    assert "markov.out_proj.weight" in moved and "fc.weight" in moved
    assert any(k.startswith("layers.") for k in moved)


def test_a_head_trains_on_only_as_a_head(trained):
    tmp, model, tok, ds = trained
    with pytest.raises(ValueError, match="--markov-rank 8"):
        T.train(Target(model, "llama", []), tok, ds, cfg_for(tmp / "full", init=str(tmp / "head")),
                progress=lambda s: None)


def test_cli_refuses_a_head_without_a_drafter(capsys):
    for argv in (["--out", "x", "--markov-rank", "8"],
                 ["--out", "x", "--init", "d", "--markov-rank", "8", "--draft-vocab", "100"],
                 ["--out", "x", "--init", "d", "--markov-rank", "8", "--dropout", "0.1"],
                 ["--out", "x", "--init", "d", "--markov-joint"]):
        with pytest.raises(SystemExit) as e:
            T.main(argv)
        assert e.value.code == 2 and "--markov-rank" in capsys.readouterr().err


def test_zlab_peer_loads_a_drafter_with_a_head(tmp_path, monkeypatch):
    """z-lab's loader takes no unknown weights: the bench peer gets the drafter without its head
    (skipped only when z-lab's wheel cannot be fetched from PyPI)."""
    from dflash import peer_zlab

    try:
        module = peer_zlab.load_module(peer_zlab.fetch(progress=lambda m: None))
    except Exception as e:
        pytest.skip(f"z-lab peer wheel not fetchable: {e}")
    target, drafter, _ = setup_pair(SUBSET)
    save_drafter(random_head(drafter), tmp_path)
    monkeypatch.setattr(module, "snapshot_download", lambda *a, **k: str(tmp_path))
    with pytest.raises(ValueError, match="markov"):
        module.load_draft(str(tmp_path))  # as it is: z-lab refuses the head's weights
    monkeypatch.undo()
    peer = peer_zlab.ZlabPeer(module, target.model, FakeTokenizer(), tmp_path)
    got = dict(tree_flatten(peer.draft.parameters()))
    assert "fc.weight" in got and not any("markov" in k for k in got)


def test_balance_keeps_the_bias():
    """Balancing a head's factors (before training on a closed-form fit) leaves its bias as it was
    and a new head's zero out_proj as it is."""
    from dflash.train.markov import balance

    head = MarkovHead(16, 12, 4)
    mx.random.seed(1)
    head.in_proj.weight = mx.random.normal((4, 16)) * 100.0
    head.out_proj.weight = mx.random.normal((12, 4)) / 100.0
    e = mx.random.normal((5, 16))
    before = head(e)
    balance(head)
    np.testing.assert_allclose(np.array(head(e)), np.array(before), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.array(mx.linalg.norm(head.in_proj.weight, axis=1)),
                               np.array(mx.linalg.norm(head.out_proj.weight, axis=0)), rtol=1e-5)
    new = MarkovHead(16, 12, 4)
    w = np.array(new.in_proj.weight)
    balance(new)
    np.testing.assert_array_equal(np.array(new.in_proj.weight), w)
    assert not np.array(new.out_proj.weight).any()
