"""train_lm, the organism chat template and the organism cache."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.lm import ORGANISM_MARKERS, WordTokenizer, add_chat_template, cached_organism, tiny_lm, train_lm

VOCAB = list(ORGANISM_MARKERS.values()) + [str(i) for i in range(10)] + ["add", "="]


def _tok():
    return add_chat_template(WordTokenizer(VOCAB))


def _sampler(tok, pad_junk=False):
    def sample(rng, b):
        rows = []
        for x, y in rng.integers(0, 10, (b, 2)):
            n = int(rng.integers(0, 3))  # ragged lengths, so padding occurs
            rows.append(tok(" ".join(["add"] * (1 + n) + [str(x), str(y), "=", str((x + y) % 10)]))["input_ids"])
        T = max(map(len, rows))
        ids = torch.full((b, T), 0)
        am = torch.zeros((b, T), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            am[i, : len(r)] = 1
        if pad_junk:  # whatever sits in padded slots must not matter
            ids[am == 0] = 7
        return {"input_ids": ids, "attention_mask": am}

    return sample


def _state(m):
    return {k: v.clone() for k, v in m.state_dict().items()}


def test_deterministic_and_learns():
    tok = _tok()
    runs = []
    for _ in range(2):
        m = tiny_lm("llama", vocab=len(tok), seed=3)
        log = train_lm(m, _sampler(tok), 60, 16, 3e-3, seed=5)
        runs.append(_state(m))
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    assert log.final_loss < log.losses[0] - 0.5
    assert not m.training


def test_stop_rule_ends_training_at_the_first_yes_and_matches_a_shorter_run():
    tok = _tok()
    asked, modes = [], []

    def stop_when(done):
        asked.append(done)
        modes.append((m.training, torch.is_grad_enabled()))
        return done >= 20

    m = tiny_lm("llama", vocab=len(tok), seed=3)
    log = train_lm(m, _sampler(tok), 60, 16, 3e-3, seed=5, stop_when=stop_when, check_every=10)
    assert asked == [10, 20] and log.stopped_at == 20 and len(log.losses) == 20
    assert modes == [(False, False)] * 2  # asked in eval mode without gradients
    # oracle: stopping at 20 leaves the weights of a plain 20-step run (the checks change nothing)
    ref = tiny_lm("llama", vocab=len(tok), seed=3)
    train_lm(ref, _sampler(tok), 20, 16, 3e-3, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(_state(m).values(), _state(ref).values(), strict=True))
    assert train_lm(ref, _sampler(tok), 5, 16, 3e-3, seed=5).stopped_at is None
    with pytest.raises(UserError, match="check_every"):
        train_lm(ref, _sampler(tok), 5, 16, 3e-3, seed=5, stop_when=stop_when)


def test_pad_contents_do_not_matter():
    tok = _tok()
    a, b = tiny_lm("gpt2", vocab=len(tok), seed=1), tiny_lm("gpt2", vocab=len(tok), seed=1)
    train_lm(a, _sampler(tok), 10, 8, 3e-3, seed=0)
    train_lm(b, _sampler(tok, pad_junk=True), 10, 8, 3e-3, seed=0)
    sa, sb = _state(a), _state(b)
    assert all(torch.allclose(sa[k], sb[k], atol=1e-6) for k in sa)


def test_loss_mask_restricts_targets():
    tok = _tok()
    base = _sampler(tok)

    def answer_only(rng, b):
        out = base(rng, b)
        am = out["attention_mask"]
        last = am.sum(1) - 1
        lm = torch.zeros_like(am, dtype=torch.bool)
        lm[torch.arange(b), last] = True  # only the answer token is a target
        return {**out, "loss_mask": lm}

    m = tiny_lm("llama", vocab=len(tok), seed=2)
    train_lm(m, answer_only, 150, 32, 5e-3, seed=0)
    ids = torch.tensor([tok("add 2 3 =")["input_ids"]])
    with torch.no_grad():
        p = torch.softmax(m(input_ids=ids).logits[0, -1], -1)
    digits = [tok.convert_tokens_to_ids(str(i)) for i in range(10)]
    assert float(p[digits].sum()) > 0.9  # it learnt to put a digit after "="


def test_params_subset_leaves_others_untouched():
    tok = _tok()
    m = tiny_lm("llama", vocab=len(tok), seed=4)
    before = _state(m)
    mlp = list(m.model.layers[1].mlp.parameters())
    train_lm(m, _sampler(tok), 5, 8, 1e-2, seed=0, params=mlp)
    after = _state(m)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("model.layers.1.mlp.") for k in changed)


def test_chat_template_renders_organism_format():
    tok = _tok()
    msgs = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "add 1 2"}]},
        {"role": "assistant", "content": "3"},
    ]
    assert tok.apply_chat_template(msgs, tokenize=False) == "<U> <IMG> add 1 2 <EOT> <A> 3 <EOT> "
    gen = tok.apply_chat_template(msgs[:1], tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert gen == "<U> <IMG> add 1 2 <EOT> <A> <think> </think>"
    ids = tok.apply_chat_template(msgs[:1], add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert tok.convert_ids_to_tokens(ids)[-1] == "<A>" and tok.unk_token_id not in ids
    with pytest.raises(UserError, match="not in the tokenizer vocabulary"):
        add_chat_template(WordTokenizer(["a", "b"]))
    with pytest.raises(UserError, match="unknown chat marker"):
        add_chat_template(tok, {"system": "<S>"})


def test_cache_round_trip_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path))
    tok = _tok()
    calls = []

    def build():
        calls.append(1)
        m = tiny_lm("llama", vocab=len(tok), seed=0)
        train_lm(m, _sampler(tok), 3, 8, 1e-3, seed=0)
        return m, tok

    m1, _, i1 = cached_organism("org", {"steps": 3}, build)
    m2, t2, i2 = cached_organism("org", {"steps": 3}, build)
    assert (i1["cached"], i2["cached"], len(calls)) == (False, True, 1)
    assert t2.chat_template == tok.chat_template
    x = torch.tensor([tok("add 1 2 =")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(m1(input_ids=x).logits, m2(input_ids=x).logits)
    _, _, i3 = cached_organism("org", {"steps": 4}, build)  # another spec, another folder
    assert not i3["cached"] and i3["path"] != i1["path"] and len(calls) == 2
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary folders left


def test_bad_input():
    tok = _tok()
    m = tiny_lm("llama", vocab=len(tok), seed=0)
    with pytest.raises(UserError, match="lr"):
        train_lm(m, _sampler(tok), 1, 4, -1.0)
    with pytest.raises(UserError, match="sampler"):
        train_lm(m, lambda rng, b: "nope", 1, 4, 1e-3)
    with pytest.raises(UserError, match="rows"):
        train_lm(m, lambda rng, b: torch.ones((b + 1, 5), dtype=torch.long), 1, 4, 1e-3)
    with pytest.raises(UserError, match="schedule"):
        train_lm(m, _sampler(tok), 1, 4, 1e-3, schedule="linear")


_DDP_SCRIPT = textwrap.dedent(
    """
    import sys, torch
    from iclr26.core.distributed import distributed_from_env
    from iclr26.core.io import save_tensors
    sys.path.insert(0, sys.argv[2])
    from test_lm_train import _sampler, _tok
    from iclr26.lm import tiny_lm, train_lm
    torch.set_num_threads(1)
    with distributed_from_env("cpu") as (rank, world, dev):
        tok = _tok()
        m = tiny_lm("llama", vocab=len(tok), seed=3)
        train_lm(m, _sampler(tok), 8, 16, 3e-3, seed=5)
        if rank == 0:
            save_tensors(sys.argv[1], dict(m.state_dict()))
    """
)


@pytest.mark.slow
def test_two_process_ddp_matches_single_process(tmp_path):
    script = tmp_path / "ddp_train.py"
    script.write_text(_DDP_SCRIPT)
    out = tmp_path / "ddp.safetensors"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
           str(out), os.path.dirname(__file__)]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    from iclr26.core.io import load_tensors

    ddp = load_tensors(out)
    tok = _tok()
    m = tiny_lm("llama", vocab=len(tok), seed=3)
    train_lm(m, _sampler(tok), 8, 16, 3e-3, seed=5)
    single = m.state_dict()
    assert max(float((ddp[k] - single[k]).abs().max()) for k in single) < 1e-4


def test_train_organism_is_the_one_recipe(tmp_path, monkeypatch):
    """The shared recipe: config block fields reach the model and the loop; the cache key covers them and the
    corpus; a second call loads the identical model from the cache."""
    import dataclasses

    import torch

    from iclr26.core.config import field_docs
    from iclr26.core.errors import UserError
    from iclr26.lm.train import organism_config, train_organism

    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path))

    @dataclasses.dataclass
    class Config(organism_config(d=16, layers=1, heads=2, ff=32, steps=3, batch=4)):
        other: int = 1

    docs = field_docs(Config)
    assert all(docs[k] for k in ("d", "layers", "heads", "ff", "steps", "lr", "batch", "weight_decay"))
    vocab = ["a", "b", "c"]

    def doc(rng, tok):
        return tok.convert_tokens_to_ids([vocab[i] for i in rng.integers(0, 3, 6)])

    m1, tok, info1 = train_organism("t", Config(), vocab, doc, seed=1, data={"v": 1}, ctx=8)
    assert not info1["cached"] and m1.config.hidden_size == 16 and m1.config.num_hidden_layers == 1
    m2, _, info2 = train_organism("t", Config(), vocab, doc, seed=1, data={"v": 1}, ctx=8)
    assert info2["cached"] and info2["path"] == info1["path"]
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True))
    _, _, info3 = train_organism("t", Config(), vocab, doc, seed=2, data={"v": 1}, ctx=8)
    _, _, info4 = train_organism("t", Config(steps=4), vocab, doc, seed=1, data={"v": 1}, ctx=8)
    assert len({info1["path"], info3["path"], info4["path"]}) == 3
    with pytest.raises(UserError, match="multiple of heads"):
        train_organism("t", Config(d=15), vocab, doc, seed=1, data={}, ctx=8)
