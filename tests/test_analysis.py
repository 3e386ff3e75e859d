"""The Adam reward-scale check on hand-made rollouts: what DESIGN section 8 measured, re-derived on a tiny model."""

import pytest
import torch

from dgro_lib.analysis import adam_scale_check
from dgro_lib.data import kk
from dgro_lib.data.trace import completion_text
from dgro_lib.models import EMBEDDED_PRESETS, build_embedded_tokenizer, build_tiny_model

torch.set_num_threads(1)


def test_reward_scale_under_adam_and_sgd(monkeypatch):
    tokenizer = build_embedded_tokenizer()
    model = build_tiny_model(EMBEDDED_PRESETS["ci"], tokenizer=tokenizer)
    records = kk.generate(2, 2, seed=3)
    G = 4

    def fake_sample(model, tokenizer, prompts, *, n, **kw):
        # per prompt: two correct completions, one with the answer flipped, one with bad format
        out = []
        for r in records:
            good = completion_text(r)
            flipped = good.replace("knight", "KNAVE").replace("knave", "knight").replace("KNAVE", "knave")
            texts = [good, good, flipped, "no tags at all"][:n]
            out += [tokenizer(" " + t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                    for t in texts]
        return out

    monkeypatch.setattr("dgro_lib.analysis.sample", fake_sample)
    df = adam_scale_check(model, tokenizer, records, num_generations=G, updates=3, beta2=0.1, lr=1e-3,
                          max_new_tokens=8).set_index(["comparison", "optimizer"])
    same = df.loc[("[-5,5] vs [-1,1], beta2=0", "adam")]
    assert same["ratio"] == pytest.approx(1.0, abs=1e-3) and same["cosine"] == pytest.approx(1.0, abs=1e-4)
    equiv = df.loc[("[-5,5] beta2=0.1 vs [-1,1] beta2=0.02", "adam")]
    assert equiv["ratio"] == pytest.approx(1.0, abs=1e-3) and equiv["cosine"] == pytest.approx(1.0, abs=1e-4)
    sgd = df.loc[("[-5,5] vs [-1,1], beta2=0", "sgd")]
    # exactly 5 for the first SGD step; later steps see different gradients (the weights moved 5x further)
    assert sgd["ratio"] == pytest.approx(5.0, rel=0.05) and sgd["cosine"] > 0.99
    differ = df.loc[("[-5,5] vs [-1,1], beta2=0.1", "adam")]
    assert abs(differ["ratio"] - 1.0) > 1e-3 or differ["cosine"] < 1 - 1e-4
    var = df.attrs["reward_variance"]
    assert var["[-5,5]"] == pytest.approx(25 * var["[-1,1]"])
