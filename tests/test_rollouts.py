"""merge_rollouts: AEPO's substitution and J2/J4's appended rows, padding, flags (pure tensors, no trainer)."""

import pytest
import torch

from dgro_lib.losses import ExtraRollouts, loss_entry
from dgro_lib.rl.rollouts import allocate_extra_rows, merge_rollouts, select_extra_rows

PAD = 0


def batch(n, P, C, start, adv):
    """n rows, prompt width P (left-padded: row r has P - r%2 real tokens), completion width C (right-padded)."""
    pid = torch.arange(start, start + n * P).reshape(n, P) + 100
    pm = torch.ones(n, P, dtype=torch.long)
    pm[1::2, 0] = 0
    pid[pm == 0] = PAD
    cid = torch.arange(start, start + n * C).reshape(n, C) + 1000
    cm = torch.ones(n, C, dtype=torch.long)
    cm[:, -1] = 0
    cid[cm == 0] = PAD
    return {"prompt_ids": pid, "prompt_mask": pm, "completion_ids": cid, "completion_mask": cm,
            "advantages": torch.tensor(adv, dtype=torch.float), "rewards": torch.tensor(adv, dtype=torch.float) * 2,
            "group_ids": torch.arange(n) // 2, "old_per_token_logps": None, "num_items_in_batch": cm.sum()}


def test_aepo_substitutes_the_first_rows_with_advantage_one():
    on = batch(6, 3, 4, 0, [0.5, -0.5, 1.0, -1.0, 0.2, -0.2])
    ex = batch(4, 5, 2, 50, [0.04, 0.9, -0.9, 0.06])  # rows 1 and 3 pass advantage > 0.05
    spec = ExtraRollouts(placement="replace", min_advantage=0.05, set_advantage=1.0, max_rows=60, halve_above_base=True)
    m, st = merge_rollouts(on, ex, spec, temperature=1.2, sampling_temperature=1.0, high_entropy=False, pad_token_id=PAD)
    assert m["completion_ids"].shape == (6, 4) and m["prompt_ids"].shape == (6, 5)
    assert m["rollout_flags"].tolist() == [1, 1, 0, 0, 0, 0]
    assert m["advantages"].tolist() == [1.0, 1.0, 1.0, -1.0, pytest.approx(0.2), pytest.approx(-0.2)]
    assert m["rewards"][:2].tolist() == ex["rewards"][[1, 3]].tolist()  # raw rewards travel with their rows
    # prompts left-padded to the wider width, completions right-padded: real tokens keep their order
    torch.testing.assert_close(m["prompt_ids"][2:, 2:], on["prompt_ids"][2:])
    assert torch.all(m["prompt_ids"][2:, :2] == PAD) and torch.all(m["prompt_mask"][2:, :2] == 0)
    torch.testing.assert_close(m["completion_ids"][:2, :2], ex["completion_ids"][[1, 3]])
    assert torch.all(m["completion_mask"][:2, 2:] == 0)
    assert m["old_per_token_logps"] is None
    assert int(m["num_items_in_batch"]) == int(m["completion_mask"].sum())
    assert st["extra_rollouts/kept"] == 2 and st["extra_rollouts/T"] == 1.2
    # high entropy halves AEPO's budget: min(60, 2) // 2 = 1
    m2, _ = merge_rollouts(on, ex, spec, temperature=0.8, sampling_temperature=1.0, high_entropy=True, pad_token_id=PAD)
    assert m2["rollout_flags"].tolist() == [1, 0, 0, 0, 0, 0] and m2["rollout_temps"][0].item() == pytest.approx(0.8)


def test_append_keeps_every_on_policy_row():
    on = batch(4, 3, 4, 0, [0.5, -0.5, 1.0, -1.0])
    ex = batch(2, 3, 6, 9, [0.3, -0.3])
    m, st = merge_rollouts(on, ex, ExtraRollouts(placement="append"), temperature=0.8, sampling_temperature=1.0,
                           high_entropy=True, pad_token_id=PAD)
    assert m["completion_ids"].shape == (6, 6)
    torch.testing.assert_close(m["completion_ids"][:4, :4], on["completion_ids"])
    torch.testing.assert_close(m["advantages"], torch.cat([on["advantages"], ex["advantages"]]))
    assert m["rollout_flags"].tolist() == [0, 0, 0, 0, 1, 1]
    assert m["rollout_temps"].tolist() == pytest.approx([1.0] * 4 + [0.8] * 2)
    assert st["extra_rollouts/frac_of_batch"] == pytest.approx(2 / 6)


def test_select_caps_and_errors_name_the_problem():
    adv = torch.tensor([1.0, 2.0, 3.0, 4.0])
    spec = ExtraRollouts(placement="replace", max_rows=3, halve_above_base=True)
    assert select_extra_rows(adv, spec, high_entropy=False).tolist() == [0, 1, 2]
    assert select_extra_rows(adv, spec, high_entropy=True).tolist() == [0]
    with pytest.raises(ValueError, match="placement"):
        ExtraRollouts(placement="prepend")
    with pytest.raises(ValueError, match="fraction"):
        ExtraRollouts(placement="append", fraction=0.0)
    on = batch(2, 3, 4, 0, [0.0, 0.0])
    ex = batch(2, 3, 4, 0, [0.0, 0.0])
    ex["pixel_values"] = on["pixel_values"] = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match="pixel_values"):
        merge_rollouts(on, ex, ExtraRollouts(placement="append"), temperature=1.2, sampling_temperature=1.0,
                       high_entropy=False, pad_token_id=PAD)
    del ex["pixel_values"]
    with pytest.raises(ValueError, match="pixel_values"):
        merge_rollouts(on, ex, ExtraRollouts(placement="append"), temperature=1.2, sampling_temperature=1.0,
                       high_entropy=False, pad_token_id=PAD)


def test_registry_declares_the_rollouts():
    aepo = loss_entry("aepo").extra_rollouts({"fraction": 0.25, "reinforce_sample_num": 8})
    assert (aepo.placement, aepo.fraction, aepo.max_rows, aepo.min_advantage, aepo.set_advantage) == (
        "replace", 0.25, 8, 0.05, 1.0)
    assert aepo.temperature(0.3) == 1.2 and aepo.temperature(0.7) == 0.8  # T_high iff H <= H0 = 0.5
    assert loss_entry("j2").extra_rollouts().placement == loss_entry("j4").extra_rollouts().placement == "append"
    assert loss_entry("dgro").extra_rollouts() is None and loss_entry("j3").extra_rollouts() is None
    assert ExtraRollouts(placement="append", fraction=0.25).n_prompts(2) == 1  # at least one prompt


def test_aepo_defaults_follow_the_authors_latest_trainer():
    """597358816/AEPO since 1a3e368 resamples a quarter of the batch (``gen_batch_bak[:len // 4]``); 1.0 is the older
    07f16ff, still reachable; H is the previous step's -log pi estimate (``actor/entropy_loss``)."""
    spec = loss_entry("aepo").extra_rollouts()
    assert spec.fraction == 0.25 and spec.entropy_source == "nll" and spec.max_rows == 60
    assert spec.n_prompts(512) == 128  # the DCPO paper's 512 prompts per rollout batch
    assert loss_entry("aepo").extra_rollouts({"fraction": 1.0}).n_prompts(512) == 512


@pytest.mark.parametrize("counts,cap,high,expected", [
    ([50, 50], 60, False, [50, 10]),   # one process alone would keep 50 + 50 = 100 > 60
    ([50, 50], 60, True, [30, 0]),     # min(60, 100) // 2 = 30, filled in process order
    ([0, 7, 7], 10, False, [0, 7, 3]),
    ([3, 4], None, False, [3, 4]),
    ([3, 4], 60, False, [3, 4]),
])
def test_the_row_cap_holds_for_the_whole_rollout_batch(counts, cap, high, expected):
    """reinforce_sample_num is applied on the authors' driver to the gathered batch: min(cap, total) (// 2 when
    H > H0) rows over all processes, taken first-come in process order; never more than a process has."""
    spec = ExtraRollouts(placement="replace", max_rows=cap, halve_above_base=True, min_advantage=0.05)
    got = allocate_extra_rows(counts, spec, high_entropy=high)
    assert got == expected
    total = sum(counts)
    want = total if cap is None else min(cap, total)
    assert sum(got) == (want // 2 if high else want) and all(0 <= g <= c for g, c in zip(got, counts))
    # the local selection with a quota keeps the first `quota` qualifying rows
    adv = torch.tensor([1.0, -1.0, 2.0, 0.0, 3.0])
    assert select_extra_rows(adv, spec, high_entropy=high, limit=2).tolist() == [0, 2]
    assert spec.candidates(adv) == 3
