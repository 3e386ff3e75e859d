"""One ``trl.GRPOTrainer`` subclass that trains with any loss of :mod:`dgro_lib.losses`, looked up by name.

What TRL 1.16 does not give a custom loss, and this class adds (DESIGN section 5):

* **Raw rewards and true group statistics.** TRL hands ``_compute_loss`` only its own (possibly
  std-scaled) advantages, after shuffling rows across groups. We capture the raw weighted rewards in
  ``_calculate_rewards`` (gathered over all ranks, still in group order), compute the baseline V(x) and
  the advantages with :func:`dgro_lib.losses.compute_advantages` *before* the shuffle, and attach
  ``rewards``, ``group_ids`` and the advantages as row-aligned tensors that travel through the shuffle.
* **A loss looked up by name.** ``_compute_loss`` computes per-token log-probs (and entropies) with TRL's
  own fused head, then calls ``loss_fn(logps, old_logps, mask, advantages, **loss_kwargs, **extras)``.
  It never branches on the algorithm; extra tensors a loss declares with ``requires=`` are passed when
  the batch has them.
* **Diagnostics.** Entropy, reward mean/std/variance, the fraction of zero-variance groups and whatever
  the loss returns (for DGRO the beta2/beta1 gradient-magnitude ratio) go into ``self._metrics`` so
  TRL's logger reduces and reports them.

* **TRL's own losses.** Registry entries ``grpo``, ``dapo``, ``dr_grpo``, ``bnpo`` carry a ``trl_loss_type``:
  the trainer sets TRL's ``loss_type`` to it (and any ``loss_kwargs`` onto the matching GRPOConfig fields,
  e.g. ``epsilon``, ``beta`` for the k3 KL) and calls ``GRPOTrainer._compute_loss`` unchanged, with our
  advantages. A property of the registry entry, not a branch on its name.
* **Log-probs at other temperatures.** A loss that requires ``temp_logps`` (DCPO, J3) gets
  {T: (B, T) log pi^T} for the temperatures it declares, from the same forward pass: the backbone's last
  hidden state is captured by a hook and projected through the LM head in chunks
  (:func:`dgro_lib.logprobs.chunked_logprobs`), detached.

The beta2 term of DGRO has zero gradient when pi_theta == pi_old. TRL computes ``old_per_token_logps``
only when a rollout batch feeds several optimizer steps (``num_iterations > 1``), so DGRO configs that
want beta2 to act must set ``num_iterations >= 2``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from trl import GRPOTrainer

from .logprobs import HiddenStateCapture, chunked_logprobs
from .losses import compute_advantages, get_loss, group_stats, loss_requires, loss_temperatures, trl_loss_type

__all__ = ["DGROTrainer", "make_rollout_func"]


class DGROTrainer(GRPOTrainer):
    """``GRPOTrainer`` with a pluggable loss from the :mod:`dgro_lib.losses` registry.

    Args:
        loss_name: registered loss name (``dgro``, ``kimi``, ...); unknown names fail at construction
            with the list of valid ones.
        loss_kwargs: keyword arguments of the loss (e.g. ``beta1``, ``beta2``, ``ratio_level``, ``aggregation``).
        value: baseline V(x): ``group_mean`` or ``soft`` (see :func:`compute_advantages`).
        scale: ``None`` (A = r - V, DGRO) or ``group_std`` (GRPO-style scaling).
        logprob_chunk_size: tokens per LM-head chunk when a loss needs log-probs at other temperatures
            (peak extra memory ~ 3 x chunk x vocab x 4 bytes).
        *args, **kwargs: passed to :class:`trl.GRPOTrainer`.
    """

    def __init__(
        self,
        *args: Any,
        loss_name: str = "dgro",
        loss_kwargs: dict[str, Any] | None = None,
        value: str = "group_mean",
        scale: str | None = None,
        logprob_chunk_size: int = 256,
        **kwargs: Any,
    ):
        self.loss_name = loss_name
        self.loss_fn = get_loss(loss_name)
        self.loss_extras = tuple(loss_requires(loss_name))
        self.loss_kwargs = dict(loss_kwargs or {})
        self.loss_temperatures = loss_temperatures(loss_name, self.loss_kwargs)
        self.trl_loss = trl_loss_type(loss_name)
        self.value = value
        self.scale = scale
        self.logprob_chunk_size = int(logprob_chunk_size)
        self._captured_rewards: torch.Tensor | None = None
        grpo_args = kwargs.get("args", args[1] if len(args) > 1 else None)
        if self.trl_loss is not None:
            self._configure_trl_loss(grpo_args)
        if self.loss_temperatures and grpo_args is not None and getattr(grpo_args, "num_iterations", 1) > 1:
            raise ValueError(
                f"loss {loss_name!r} needs log-probs of pi_old at temperatures {self.loss_temperatures}; they are "
                "taken from the loss's own forward pass, which is pi_old only on-policy: set num_iterations=1"
            )
        super().__init__(*args, **kwargs)

    def _configure_trl_loss(self, grpo_args) -> None:
        """Point TRL at its own loss: ``loss_type`` and the loss kwargs as GRPOConfig fields (epsilon, beta, ...)."""
        if grpo_args is None:
            raise ValueError(f"loss {self.loss_name!r} is TRL's own; pass args=GRPOConfig(...)")
        bad = sorted(k for k in self.loss_kwargs if not hasattr(grpo_args, k))
        if bad:
            raise ValueError(
                f"loss {self.loss_name!r} is TRL's own: its kwargs must be GRPOConfig fields; unknown: {bad} "
                "(e.g. epsilon, epsilon_high, beta, delta, importance_sampling_level)"
            )
        grpo_args.loss_type = self.trl_loss
        for key, val in self.loss_kwargs.items():
            setattr(grpo_args, key, val)

    # -- rewards and advantages, computed before TRL shuffles the rows ---------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        # (N_all_ranks, n_funcs), in group order: every G consecutive rows share a prompt.
        weights = self.reward_weights.to(rewards_per_func.device)
        self._captured_rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        rewards = self._captured_rewards
        self._captured_rewards = None
        beta1 = float(self.loss_kwargs.get("beta1", 1.0))
        beta2 = float(self.loss_kwargs.get("beta2", 0.0))
        advantages = compute_advantages(
            rewards, group_size, value=self.value, beta1=beta1, beta2=beta2, scale=self.scale
        )
        n_local = output["completion_ids"].size(0)
        process_slice = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)
        group_ids = torch.arange(rewards.numel(), device=rewards.device) // group_size
        output["advantages"] = advantages[process_slice]
        output["rewards"] = rewards[process_slice]
        output["group_ids"] = group_ids[process_slice]
        for key, val in group_stats(rewards, group_size).items():
            self._metrics[mode][f"reward_stats/{key}"].append(float(val))
        return output

    # -- the loss ------------------------------------------------------------------------------------------

    def _compute_loss(self, model, inputs):
        if self.trl_loss is not None:  # TRL's own loss, with the advantages we attached
            return super()._compute_loss(model, inputs)
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        mask = completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        temp_logps = None
        if self.loss_temperatures:
            with HiddenStateCapture(model) as cap:
                logps, entropies, _ = self._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True
                )
            temp_logps = self._temperature_logps(cap, completion_ids)
        else:
            logps, entropies, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True
            )
        old_logps = inputs.get("old_per_token_logps")
        if old_logps is None:  # one optimizer step per rollout batch: pi_old is the current policy
            old_logps = logps.detach()
        # What a loss may declare with ``requires=``; TRL fills ref_per_token_logps only when args.beta != 0.
        available = {
            "entropies": entropies,
            "rewards": inputs.get("rewards"),
            "group_ids": inputs.get("group_ids"),
            "ref_logps": inputs.get("ref_per_token_logps"),
            "sampling_logps": inputs.get("sampling_per_token_logps"),
            "temp_logps": temp_logps,
        }
        extras = {}
        for name in self.loss_extras:
            if available.get(name) is None:
                raise KeyError(f"loss {self.loss_name!r} requires {name!r}, which this batch does not carry")
            extras[name] = available[name]
        loss, metrics = self.loss_fn(
            logps, old_logps, mask.to(logps.dtype), inputs["advantages"], **self.loss_kwargs, **extras
        )

        mode = "train" if self.model.training else "eval"
        fmask = mask.to(entropies.dtype)
        ent = (entropies * fmask).sum() / fmask.sum().clamp(min=1.0)
        self._metrics[mode]["entropy"].append(self.accelerator.gather(ent.detach()).mean().item())
        self._metrics[mode]["loss/value"].append(float(loss.detach()))
        for key, val in metrics.items():
            self._metrics[mode][key].append(float(val))
        if mode == "train":
            loss = loss / self.current_gradient_accumulation_steps
        return loss

    def _temperature_logps(self, cap: HiddenStateCapture, completion_ids: torch.Tensor) -> dict[float, torch.Tensor]:
        """{T: (B, C) log pi^T(y_t)} from the captured hidden states (C completion tokens), chunked, detached."""
        if cap.hidden is None:
            raise RuntimeError("the forward pass did not expose the backbone's hidden states")
        cfg = self.model.config.get_text_config()
        C = completion_ids.size(1)
        hidden = cap.hidden[:, -C - 1 : -1]  # position k-1 predicts completion token k
        head = cap.lm_head
        out = chunked_logprobs(hidden, head.weight, completion_ids, temperatures=self.loss_temperatures,
                               bias=head.bias, compute_entropy=False,
                               softcap=getattr(cfg, "final_logit_softcapping", None),
                               chunk_size=self.logprob_chunk_size)
        return {t: lp for t, (lp, _ent) in out.items()}


def make_rollout_func(sample_fn: Callable[..., list[list[int]]]) -> Callable:
    """Adapt a token sampler to TRL's ``rollout_func`` hook (so generation can be swapped without forking TRL).

    ``sample_fn(model, tokenizer, prompts, *, n, temperature, max_new_tokens)`` returns one list of completion
    ids per prompt row; TRL has already repeated each prompt ``num_generations`` times, so ``n=1``.
    """

    def rollout_func(prompts: list[str], trainer: GRPOTrainer) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        was_training = model.training
        model.eval()
        try:
            completion_ids = sample_fn(
                model,
                tokenizer,
                prompts,
                n=1,
                temperature=trainer.temperature,
                max_new_tokens=trainer.max_completion_length,
            )
        finally:
            model.train(was_training)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    return rollout_func
