"""Measurements that sit beside the figures: what a reward-range change does under Adam.

Adam is invariant to a constant factor on the loss, up to its epsilon. The [-5,5] scheme of DGRO Table 4 is
exactly 5x the [-1,1] scheme, and for DGRO's loss (Eq. 4) scaling rewards by c equals scaling the loss by c
with beta2 replaced by beta2/c. So under Adam a [-5,5] run equals a [-1,1] run with beta2/5, and with beta2
inert (one update per rollout batch) the two reward ranges give the same updates. :func:`adam_scale_check`
measures this on identical rollouts instead of asserting it.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

import pandas as pd
import torch

from .sampling import sample

__all__ = ["completion_logps", "adam_scale_check"]


def completion_logps(model, prompt_ids: list[list[int]], completion_ids: list[list[int]], pad_id: int):
    """Per-token log-probs of each completion given its prompt.

    Returns ``(logps, mask)``, both (B, T) with T = the longest completion; prompts are left-padded and
    completions right-padded, as in TRL.
    """
    B = len(prompt_ids)
    P = max(len(p) for p in prompt_ids)
    T = max(1, max(len(c) for c in completion_ids))
    ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, P + T), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        ids[i, P - len(p):P] = torch.tensor(p)
        attn[i, P - len(p):P] = 1
        if c:
            ids[i, P:P + len(c)] = torch.tensor(c)
            attn[i, P:P + len(c)] = 1
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=position_ids).logits[:, P - 1:-1].float()
    logps = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, P:].unsqueeze(-1)).squeeze(-1)
    return logps, attn[:, P:].to(logps.dtype)


def _flat_params(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])


def adam_scale_check(
    model,
    tokenizer,
    records: Sequence[dict],
    *,
    num_generations: int = 8,
    updates: int = 5,
    beta2: float = 0.1,
    lr: float = 3e-5,
    loss_kwargs: dict[str, Any] | None = None,
    max_new_tokens: int = 320,
    template: str = "plain",
    seed: int = 0,
) -> pd.DataFrame:
    """Apply ``updates`` optimizer steps on ONE fixed rollout batch under several reward/beta2/optimizer settings
    and compare the resulting weight changes pairwise (norm ratio and cosine).

    Rows: the comparison, the optimizer, ``ratio`` = ||dW_a|| / ||dW_b|| and ``cosine``(dW_a, dW_b). The claim
    being checked is in the ``expect`` column.
    """
    from .data import kk
    from .losses import compute_advantages, get_loss
    from .rewards import get_scheme, kk_outcome

    torch.manual_seed(seed)
    prompts = [kk.format_prompt(r, template=template) for r in records]
    completion_ids = sample(model, tokenizer, prompts, n=num_generations, temperature=1.0,
                            max_new_tokens=max_new_tokens, seed=seed)
    rows = [r for r in records for _ in range(num_generations)]
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    outcomes = [kk_outcome(t, names=r["names"], solution=r["solution"]) for t, r in zip(texts, rows)]
    prompt_ids = [tokenizer(kk.format_prompt(r, template=template), add_special_tokens=False)["input_ids"]
                  for r in rows]
    loss_fn = get_loss("dgro")
    kwargs = {"aggregation": "token-mean", **(loss_kwargs or {})}
    with torch.no_grad():
        old_logps, mask = completion_logps(model, prompt_ids, completion_ids, tokenizer.pad_token_id)
    theta0 = _flat_params(model)

    def delta(scheme: str, b2: float, optimizer: str) -> torch.Tensor:
        sch = get_scheme(scheme)
        rewards = torch.tensor([sch.score(o) for o in outcomes], dtype=torch.float32)
        adv = compute_advantages(rewards, num_generations, value="group_mean")
        m = copy.deepcopy(model)
        m.train()
        params = [p for p in m.parameters() if p.requires_grad]
        opt = (torch.optim.Adam(params, lr=lr, betas=(0.9, 0.99)) if optimizer == "adam"
               else torch.optim.SGD(params, lr=lr))
        for _ in range(updates):
            logps, _ = completion_logps(m, prompt_ids, completion_ids, tokenizer.pad_token_id)
            loss, _ = loss_fn(logps, old_logps, mask, adv, beta1=1.0, beta2=b2, **kwargs)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return _flat_params(m) - theta0

    cases = [
        ("[-5,5] vs [-1,1], beta2=0", "adam", ("[-5,5]", 0.0), ("[-1,1]", 0.0), "identical (ratio 1, cosine 1)"),
        (f"[-5,5] vs [-1,1], beta2={beta2}", "adam", ("[-5,5]", beta2), ("[-1,1]", beta2), "differ"),
        (f"[-5,5] beta2={beta2} vs [-1,1] beta2={beta2 / 5:g}", "adam", ("[-5,5]", beta2), ("[-1,1]", beta2 / 5),
         "identical (ratio 1, cosine 1)"),
        ("[-5,5] vs [-1,1], beta2=0", "sgd", ("[-5,5]", 0.0), ("[-1,1]", 0.0), "ratio about 5 (exactly 5 for one step)"),
    ]
    cache: dict[tuple, torch.Tensor] = {}
    out = []
    for label, opt, a, b, expect in cases:
        for key in ((*a, opt), (*b, opt)):
            if key not in cache:
                cache[key] = delta(*key)
        da, db = cache[(*a, opt)], cache[(*b, opt)]
        out.append({
            "comparison": label,
            "optimizer": opt,
            "updates": updates,
            "ratio": float(da.norm() / db.norm().clamp_min(1e-30)),
            "cosine": float(torch.nn.functional.cosine_similarity(da, db, dim=0)),
            "expect": expect,
        })
    reward_var = {
        s: float(torch.tensor([get_scheme(s).score(o) for o in outcomes]).var(unbiased=False))
        for s in ("[-1,1]", "[-3,3]", "[-5,5]")
    }
    df = pd.DataFrame(out)
    df.attrs["reward_variance"] = reward_var
    return df
