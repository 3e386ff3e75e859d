"""One ``trl.GRPOTrainer`` subclass that trains with any loss of :mod:`dgro_lib.losses`, looked up by name.

What TRL 1.16 does not give a custom loss, and this class adds:

One training step reads in order: :meth:`DGROTrainer._generate_and_score_completions` (one rollout batch, its
steps numbered in its docstring), then TRL's shuffle and split, then :meth:`DGROTrainer._compute_loss` per
micro-batch. Everything of a rollout batch travels in TRL's own dict (row-aligned tensors, and the loss's batch
statistics as 0-dim tensors); what persists across steps is a typed value (:class:`~dgro_lib.rl.rollouts.EntropyTracker`,
the :class:`~dgro_lib.rl.rollouts.RolloutRecord` of the per-rank log).

* **Raw rewards and true group statistics.** TRL hands ``_compute_loss`` only its own (possibly
  std-scaled) advantages, after shuffling rows across groups. ``_score_rollouts`` collects the raw weighted
  rewards from TRL's call of ``_calculate_rewards`` (gathered over all ranks, still in group order), computes the
  baseline V(x) and the advantages with :func:`dgro_lib.losses.compute_advantages` *before* the shuffle, and
  attaches ``rewards``, ``group_ids`` and the advantages as row-aligned tensors that travel through the shuffle.
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
  (:func:`dgro_lib.models.logprobs.chunked_logprobs`), detached. When a rollout batch feeds updates after the
  policy has moved (``num_iterations > 1`` or ``steps_per_generation > gradient_accumulation_steps``, as in the
  DCPO authors' 4 mini-batches per rollout), they are scored once right after generation instead, so they
  stay log pi_old^T.
* **Statistics of the whole rollout batch.** A loss registered with ``batch_stats=`` (DCPO, J1, J3) gets
  ``batch_stats`` computed once per rollout batch, when it is generated, from the raw rewards of every process
  and the policy entropy its spec names (the previous rollout batch's in-update entropy, averaged over its
  micro-batches and processes, 0 before the first; or this batch's, from a scoring pass), so neither the
  micro-batch split nor the number of processes changes them (the DCPO authors compute them on the driver).
* **Loss kwargs are validated** against the registered loss's parameters at construction (a typo is an error
  naming the key), and only the loss function's own ones are passed to it.
* **Extra temperature-T rollouts.** A loss registered with ``extra_rollouts=`` (AEPO, J2, J4) gets, for each
  rollout batch, G more samples at temperature T (from the previous rollout batch's policy entropy) for a fraction of
  the prompts, generated and scored by the same TRL code path with the sampling temperature switched;
  :func:`dgro_lib.rl.rollouts.merge_rollouts` substitutes or appends them as the registry entry declares. Their
  logs go under ``extra_rollouts/``.

* **Divergence stops with its evidence.** A non-finite reward (checked in ``_calculate_rewards``, right after
  scoring), loss (checked in ``_compute_loss`` before it is returned, i.e. before backward; our losses and TRL's)
  or gradient norm (checked in ``_get_grad_norm``, which transformers calls after clipping and before
  ``optimizer.step()``) stops the run with :class:`NonFiniteError` naming the step and the quantity, after saving
  the offending rollout batch to ``<output_dir>/nonfinite_step<k>.pt`` (+ ``.json``; :meth:`DGROTrainer._save_evidence`).
  The diverged update is never applied, so the last checkpoint on disk is the last good state. With
  ``skip_nonfinite=True`` the step is skipped instead (its gradients are dropped, so the optimizer moves nothing,
  Adam moments included) and counted in the logged ``nonfinite/skipped``.

* **The prompt text is the whole prompt.** TRL tokenizes text prompts with the tokenizer's special tokens
  (``_tokenize_prompts``, the path its vLLM generation takes), so a BOS that the model's chat template already
  wrote (the ``chat`` prompt template; DeepSeek-R1-Distill writes ``<｜begin▁of▁sentence｜>``) would come twice.
  Text prompts are tokenized with ``add_special_tokens=False`` instead, as the rollout sampler and every
  evaluation do, so training and evaluation see the same ids.

The private TRL methods overridden here (TRL is pinned to the release they were written against; a test fails
when one of them disappears): ``_generate_and_score_completions``, ``_compute_loss``, ``_calculate_rewards``,
``_tokenize_prompts``, ``_get_grad_norm`` (in :class:`~dgro_lib.rl.divergence.DivergenceGuard`), ``_save_checkpoint``
and ``_load_optimizer_and_scheduler``.

The beta2 term of DGRO has zero gradient when pi_theta == pi_old. TRL computes ``old_per_token_logps``
only when a rollout batch feeds several optimizer steps (``num_iterations > 1``), so DGRO configs that
want beta2 to act must set ``num_iterations >= 2``.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable

import torch
from trl import GRPOTrainer
from trl.trainer.utils import maybe_gather_lm_head_ctx

from dgro_lib.rl.divergence import DivergenceGuard, NonFiniteError
from dgro_lib.models.logprobs import HiddenStateCapture, chunked_logprobs
from dgro_lib.losses import compute_advantages, group_stats, loss_entry
from dgro_lib.util.files import write_json
from dgro_lib.rl.rollouts import (EntropyTracker, RolloutRecord, ScoredRollouts, allocate_extra_rows, get_batch_stats,
                                  merge_rollouts, put_batch_stats)

__all__ = ["DGROTrainer", "NonFiniteError", "ROLLOUT_POLICIES", "make_rollout_func"]


class DGROTrainer(DivergenceGuard, GRPOTrainer):
    """``GRPOTrainer`` with a pluggable loss from the :mod:`dgro_lib.losses` registry.

    Args:
        loss_name: registered loss name (``dgro``, ``kimi``, ...); unknown names fail at construction
            with the list of valid ones.
        loss_kwargs: keyword arguments of the loss (e.g. ``beta1``, ``beta2``, ``ratio_level``, ``aggregation``).
        value: baseline V(x): ``group_mean`` or ``soft`` (see :func:`compute_advantages`).
        scale: ``None`` (A = r - V, DGRO) or ``group_std`` (GRPO-style scaling).
        logprob_chunk_size: tokens per LM-head chunk when a loss needs log-probs at other temperatures
            (peak extra memory ~ 3 x chunk x vocab x 4 bytes).
        value_lr: learning rate of the value head (losses that require ``values``, e.g. DRO); None = the
            policy's learning rate.
        forward_chunk_rows: rows per forward pass of the loss: the micro-batch's rows are sorted by completion
            length and cut into chunks of this many, each trimmed of its trailing padding, and the outputs are
            padded back, so the loss still sees the whole micro-batch (same normalization, one backward).
            Causal attention makes it exact up to floating-point rounding. None = TRL's one padded forward.
        skip_nonfinite: a non-finite reward, loss or gradient norm skips the optimizer step (its gradients are
            dropped; counted in the logged ``nonfinite/skipped``) instead of raising :class:`NonFiniteError`. A
            non-finite reward skips every step its rollout batch feeds. The evidence file is written either way.
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
        value_lr: float | None = None,
        forward_chunk_rows: int | None = None,
        skip_nonfinite: bool = False,
        **kwargs: Any,
    ):
        if forward_chunk_rows is not None and int(forward_chunk_rows) < 1:
            raise ValueError(f"forward_chunk_rows must be >= 1 or None, got {forward_chunk_rows!r}")
        self.forward_chunk_rows = None if forward_chunk_rows is None else int(forward_chunk_rows)
        self.loss_name = loss_name
        entry = loss_entry(loss_name)  # every question about the loss is asked of its registry entry
        self.loss_fn = entry.fn
        self.loss_extras = tuple(entry.requires)
        self.loss_kwargs = dict(loss_kwargs or {})
        self._loss_call_kwargs = entry.call_kwargs(self.loss_kwargs)  # validates: unknown key -> ValueError
        self.loss_temperatures = entry.temperatures(self.loss_kwargs)
        self.batch_stats_spec = entry.batch_statistics(self.loss_kwargs)
        self.trl_loss = entry.trl_loss_type
        self.value = value
        self.soft_beta = entry.soft_beta(self.loss_kwargs) if value == "soft" else None
        self.scale = scale
        self.logprob_chunk_size = int(logprob_chunk_size)
        self.extra_rollouts = entry.extra_rollouts(self.loss_kwargs)
        # state kept across steps, each a typed value: the entropy of the last updates (it picks DCPO's and AEPO's
        # temperature; checkpointed), the last rollout batch (for the per-rank log only) and the running local loss
        self.entropy = EntropyTracker()
        self._last_rollout: RolloutRecord | None = None
        self._rank_loss = [0.0, 0]  # running (sum, count) of local losses since the last rank log
        self._reward_sink: list[torch.Tensor] | None = None  # open only inside _score_rollouts (see there)
        self._init_divergence_guard(skip_nonfinite)
        grpo_args = kwargs.get("args", args[1] if len(args) > 1 else None)
        if self.extra_rollouts is not None and grpo_args is not None and getattr(grpo_args, "use_vllm", False) \
                and getattr(grpo_args, "vllm_importance_sampling_correction", False):
            raise ValueError(
                f"loss {loss_name!r} samples extra rollouts at another temperature; TRL's vLLM importance-sampling "
                "correction would compare them with temperature-1 log-probs: set vllm_importance_sampling_correction=False"
            )
        if self.trl_loss is not None:
            self._configure_trl_loss(grpo_args)
        super().__init__(*args, **kwargs)
        self.value_lr = value_lr
        if "values" in self.loss_extras:
            self._attach_value_head()

    # -- learned value V_phi(x) (DRO) ---------------------------------------------------------------------

    VALUE_HEAD = "dgro_value_head"

    def _attach_value_head(self) -> None:
        """A linear head V_phi(x) on the backbone's (detached) hidden state at the last prompt token, zero-init.

        A submodule of the policy, so TRL's optimizer, DDP/DeepSpeed wrapping and checkpoints (hence resume)
        carry it; its input is detached, so the value loss never moves the policy (DRO trains two networks).
        """
        hidden = self.model.config.get_text_config().hidden_size
        head = torch.nn.Linear(hidden, 1).to(device=self.model.device, dtype=torch.float32)
        torch.nn.init.zeros_(head.weight)
        torch.nn.init.zeros_(head.bias)
        self.model.add_module(self.VALUE_HEAD, head)

    def create_optimizer(self, model=None):
        opt = super().create_optimizer(model)
        head = getattr(self.accelerator.unwrap_model(self.model), self.VALUE_HEAD, None)
        if head is not None and self.value_lr is not None:
            ids = {id(p) for p in head.parameters()}
            for group in opt.param_groups:
                group["params"] = [p for p in group["params"] if id(p) not in ids]
            opt.add_param_group({"params": list(head.parameters()), "lr": self.value_lr, "weight_decay": 0.0})
        return opt

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
        if self.model.training:
            self._check_rewards(rewards_per_func, prompts, completions, completion_ids_list)
        if self._reward_sink is not None:  # TRL keeps only its own advantages: _score_rollouts collects the rewards
            weights = self.reward_weights.to(rewards_per_func.device)
            self._reward_sink.append((rewards_per_func * weights.unsqueeze(0)).nansum(dim=1))
        return rewards_per_func

    def _tokenize_prompts(self, prompts: list):
        """TRL's, but text prompts are tokenized as they are (no special tokens added): the prompt text, from a
        chat template or hand-written, already holds every token the model should see."""
        if prompts and isinstance(prompts[0], str):
            return self.processing_class(text=prompts, add_special_tokens=False)["input_ids"], None, {}
        return super()._tokenize_prompts(prompts)

    def _generate_and_score_completions(self, inputs):
        """One rollout batch, in order (TRL calls this once per rollout batch and returns the dict to its buffer,
        which shuffles the rows and splits them into the micro-batches :meth:`_compute_loss` receives):

        1. the entropy of the last batch's updates becomes the previous step's (:class:`EntropyTracker`);
        2. :meth:`_score_rollouts`: TRL generates and scores; our raw rewards, true-group advantages and group ids
           join its row dict (a :class:`ScoredRollouts` brings back what is not a row);
        3. the loss's once-per-batch statistics, over every process's rewards (:meth:`_rollout_batch_stats`);
        4. extra temperature-T rollouts merged in, for a loss that declares them (:meth:`_merge_extra_rollouts`);
        5. the statistics stored in the dict as 0-dim tensors, so every micro-batch carries them to the loss.
        """
        training = self.model.training
        if training:
            self._rollout_nonfinite = None
            self.entropy.close()
        batch, scored = self._score_rollouts(inputs)
        stats = self._rollout_batch_stats(batch, scored) if training and self.batch_stats_spec is not None else None
        candidates = None
        if training and self.extra_rollouts is not None:
            batch, candidates = self._merge_extra_rollouts(inputs, batch)
        if stats is not None:
            put_batch_stats(batch, stats)
        if training:
            rows = {k: batch[k].detach() for k in ("rewards", "group_ids", "advantages", "rollout_flags")
                    if batch.get(k) is not None}
            self._last_rollout = RolloutRecord(rows, stats, candidates)
        return batch

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """TRL's log, plus ``gpu/peak_memory_gib`` where training runs on a GPU: the most memory torch held on this
        process's device since the previous log (the peak is reset after each), the number a GPU user sizes
        ``per_device`` batches and ``vllm_gpu_memory_utilization`` by. Nothing is added on the CPU."""
        device = self.accelerator.device
        if device.type == "cuda":
            logs["gpu/peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
            torch.cuda.reset_peak_memory_stats(device)
        super().log(logs, start_time)

    def _note_loss(self, loss: torch.Tensor) -> None:
        self._rank_loss[0] += float(loss.detach())
        self._rank_loss[1] += 1

    def write_rank_log(self, directory, step: int) -> None:
        """Append this process's view of the last step to ``directory/rank<k>.jsonl`` (collective: every rank
        must call it): its local rollout rows (raw rewards, group ids, advantages, extra-rollout flags), the loss's
        rollout-batch statistics, every process's count of qualifying extra rows, its local loss, the loss
        averaged over ranks, and a checksum of the parameters (equal on every rank when DDP synchronised)."""
        local = self._rank_loss[0] / max(self._rank_loss[1], 1)
        self._rank_loss = [0.0, 0]
        mean = self.accelerator.reduce(torch.tensor(local, device=self.accelerator.device), reduction="mean").item()
        model = self.accelerator.unwrap_model(self.model)
        checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        last = self._last_rollout or RolloutRecord({})
        rec = {"step": step, "rank": self.accelerator.process_index, "world": self.accelerator.num_processes,
               "loss_local": local, "loss_mean": mean, "param_checksum": checksum, "batch_stats": last.batch_stats,
               "extra_candidates": last.extra_candidates, **{k: v.cpu().tolist() for k, v in last.rows.items()}}
        with open(d / f"rank{self.accelerator.process_index}.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")

    ENTROPY_STATE = "dgro_entropy_state.json"

    def _save_checkpoint(self, model, trial):
        """TRL's checkpoint plus the entropy tracker, so a resumed run picks DCPO's/AEPO's temperature from the same
        previous-step entropy as an uninterrupted one (TRL keeps its own adaptive-entropy state the same way).

        The tracker is written first: transformers writes ``trainer_state.json`` last and only then deletes the older
        checkpoint, so a checkpoint with that file is complete, and a process killed while saving leaves the previous
        complete checkpoint in place (:func:`dgro_lib.runs.store.latest_checkpoint` picks the last complete one)."""
        if self.args.should_save:
            folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
            os.makedirs(folder, exist_ok=True)
            write_json(os.path.join(folder, self.ENTROPY_STATE), self.entropy.state_dict())
        super()._save_checkpoint(model, trial)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = None if checkpoint is None else os.path.join(checkpoint, self.ENTROPY_STATE)
        if path is not None and os.path.isfile(path):  # checkpoints written before the tracker existed have none
            with open(path) as f:
                self.entropy.load_state_dict(json.load(f))

    @torch.no_grad()
    def _rollout_entropy(self, batch, scored: ScoredRollouts, source: str) -> float:
        """Token-mean entropy of this rollout batch under pi_old over every process's completion tokens (all-reduced
        sums): -log pi of the sampled tokens (``nll``; TRL's ``old_per_token_logps`` when it scored them) or the
        full-vocabulary entropy (``full``), from the scoring pass of :meth:`_score_rollouts`."""
        mask = batch["completion_mask"] if batch.get("tool_mask") is None else batch["completion_mask"] * batch["tool_mask"]
        mask = mask.float()
        old = batch.get("old_per_token_logps")
        per_token = -old if source == "nll" and old is not None else scored.token_entropy
        total = (per_token.float() * mask).sum()
        sums = self.accelerator.reduce(torch.stack([total, mask.sum()]).to(self.accelerator.device), reduction="sum")
        return float(sums[0] / sums[1].clamp(min=1.0))

    def _rollout_batch_stats(self, batch, scored: ScoredRollouts) -> dict[str, float]:
        """The loss's once-per-rollout-batch statistics (DCPO: H, T, correct fraction, alpha) over the whole batch:
        the raw rewards of every process (gathered before the shuffle) and the entropy its spec names."""
        spec = self.batch_stats_spec
        if spec.entropy_from == "previous_step":
            H = self.entropy.previous[spec.entropy_source]
        else:
            H = self._rollout_entropy(batch, scored, spec.entropy_source)
        stats = spec.compute(scored.rewards, H)
        for key, val in stats.items():
            self._metrics["train"][f"batch_stats/{key}"].append(float(val))
        return stats

    def _merge_extra_rollouts(self, inputs, output: dict) -> tuple[dict, list[int]]:
        """Generate and score G more samples at temperature T (from the previous step's entropy) for the loss's share
        of the prompts, and merge them into ``output`` as its registry entry declares; returns the merged dict and
        every process's count of qualifying extra rows."""
        spec = self.extra_rollouts
        G = self.num_generations
        if len(inputs) % G:
            raise ValueError(f"extra rollouts need whole groups on each process: {len(inputs)} local rows, G={G} "
                             "(make per_device_train_batch_size a multiple of num_generations)")
        k = spec.n_prompts(len(inputs) // G)
        H = self.entropy.previous[spec.entropy_source]
        T = spec.temperature(H)
        with self._sampling_temperature(T), self._metrics_under("train", "extra_rollouts/"):
            extra, _ = self._score_rollouts(inputs[: k * G],
                                            group_offset=self.accelerator.num_processes * len(inputs) // G)
        # the row cap (AEPO's reinforce_sample_num) holds for the whole rollout batch, as on the authors' driver:
        # every process counts its candidates, and the cap is shared out in process order
        n_candidates = torch.tensor([spec.candidates(extra["advantages"])], device=self.accelerator.device)
        counts = self.accelerator.gather(n_candidates).tolist()
        quota = allocate_extra_rows(counts, spec, high_entropy=H > spec.entropy_base)[self.accelerator.process_index]
        merged, stats = merge_rollouts(
            output, extra, spec, temperature=T, sampling_temperature=self.temperature,
            high_entropy=H > spec.entropy_base, pad_token_id=self._tokenizer.pad_token_id, limit=quota,
        )
        steps = self.args.steps_per_generation
        if merged["completion_ids"].size(0) % steps:
            raise ValueError(f"{merged['completion_ids'].size(0)} rows after the extra rollouts do not split into "
                             f"steps_per_generation={steps} equal micro-batches")
        merged["num_items_in_batch"] = self.accelerator.gather(merged["num_items_in_batch"]).sum()
        for key, val in stats.items():
            self._metrics["train"][key].append(val)
        self._metrics["train"]["extra_rollouts/H_prev"].append(H)
        return merged, counts

    @contextmanager
    def _sampling_temperature(self, T: float):
        """Sample at temperature T for the duration (HF generate, our rollout_func and vLLM read these)."""
        targets = [(self, "temperature")]
        if getattr(self, "generation_config", None) is not None:
            targets.append((self.generation_config, "temperature"))
        vllm = getattr(self, "vllm_generation", None)
        if vllm is not None and hasattr(vllm, "temperature"):
            targets.append((vllm, "temperature"))
        saved = [getattr(obj, attr) for obj, attr in targets]
        try:
            for obj, attr in targets:
                setattr(obj, attr, float(T))
            yield
        finally:
            for (obj, attr), val in zip(targets, saved):
                setattr(obj, attr, val)

    @contextmanager
    def _metrics_under(self, mode: str, prefix: str):
        """Re-file every metric logged inside the block under ``prefix`` (so extra rollouts do not mix into the
        on-policy completion/reward statistics). ``num_tokens`` stays: TRL keeps it as a running total."""
        store = self._metrics[mode]
        before = {k: len(v) for k, v in store.items()}
        try:
            yield
        finally:
            for key in list(store):
                if key == "num_tokens":
                    continue
                new = store[key][before.get(key, 0):]
                if new:
                    del store[key][before.get(key, 0):]
                    store[prefix + key].extend(new)
                    if not store[key]:
                        del store[key]

    def _updates_are_off_policy(self) -> bool:
        """True when some optimizer step of a rollout batch runs after the policy has moved (several epochs over
        the batch, or the batch split over several optimizer steps): then pi_old != the loss's forward pass."""
        return self.num_iterations > 1 or self.args.steps_per_generation > self.args.gradient_accumulation_steps

    @torch.no_grad()
    def _score_old_policy(self, batch, *, want_temps: bool, entropy_source: str | None):
        """One no-grad pass of pi_old over the rollout batch, in micro-batches of ``per_device_train_batch_size``, for
        what the loss needs before the policy moves: (B, C, n_T) log pi_old^T for every declared T (``want_temps``)
        and/or the (B, C) per-token entropy estimate ``entropy_source`` (``nll``: -log pi of the sampled tokens,
        ``full``: the full-vocabulary entropy) for rollout-batch statistics. Returns (temps or None, entropy or None)."""
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        P, bs, temps, ents = batch["prompt_ids"].size(1), self.args.per_device_train_batch_size, [], []
        for s in range(0, input_ids.size(0), bs):
            lps, ent, lpt, _ = self._forward_rows(self.model, input_ids[s:s + bs], attention_mask[s:s + bs],
                                                  batch["completion_ids"][s:s + bs], P, want_temps=want_temps,
                                                  want_values=False, compute_entropy=entropy_source == "full")
            if want_temps:
                temps.append(torch.stack([lpt[t] for t in self.loss_temperatures], dim=-1))
            if entropy_source is not None:
                ents.append(-lps if entropy_source == "nll" else ent)
        return (torch.cat(temps) if want_temps else None), (torch.cat(ents) if entropy_source is not None else None)

    def _old_temperature_logps(self, batch) -> torch.Tensor:
        """(B, C, n_T) log pi_old^T of the completion tokens for every declared T (see :meth:`_score_old_policy`)."""
        return self._score_old_policy(batch, want_temps=True, entropy_source=None)[0]

    def _score_rollouts(self, inputs, group_offset: int = 0) -> tuple[dict, ScoredRollouts]:
        """TRL's generation and scoring plus our raw rewards, true-group advantages and group ids (offset by
        ``group_offset``, so extra rollouts never share an id with the on-policy groups) in its row dict; returns
        the dict and the :class:`ScoredRollouts` (every process's raw rewards, the entropy estimate) beside it.

        TRL's scoring calls :meth:`_calculate_rewards` and keeps only its own (possibly std-scaled) advantages, so
        the raw rewards are collected from that call while TRL's method runs (``_reward_sink``, open only here)."""
        self._reward_sink = sink = []
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._reward_sink = None
        if len(sink) != 1:
            raise RuntimeError(f"TRL's scoring called _calculate_rewards {len(sink)} times for one rollout batch")
        rewards = sink[0]
        training = self.model.training
        want_temps = bool(self.loss_temperatures) and training and self._updates_are_off_policy()
        spec = self.batch_stats_spec
        # rollout-batch statistics from this batch's entropy (not the previous step's) need pi_old's per-token
        # estimate, unless TRL already scored -log pi_old of the sampled tokens; one pass serves both needs
        entropy_source = spec.entropy_source if (training and group_offset == 0 and spec is not None
                                                 and spec.entropy_from == "rollout") else None
        if entropy_source == "nll" and output.get("old_per_token_logps") is not None:
            entropy_source = None
        token_entropy = None
        if want_temps or entropy_source is not None:
            temps, token_entropy = self._score_old_policy(output, want_temps=want_temps, entropy_source=entropy_source)
            if want_temps:
                output["old_temp_logps"] = temps
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        advantages = compute_advantages(rewards, group_size, value=self.value, soft_beta=self.soft_beta,
                                        scale=self.scale)
        n_local = output["completion_ids"].size(0)
        process_slice = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)
        group_ids = torch.arange(rewards.numel(), device=rewards.device) // group_size + group_offset
        output["advantages"] = advantages[process_slice]
        output["rewards"] = rewards[process_slice]
        output["group_ids"] = group_ids[process_slice]
        for key, val in group_stats(rewards, group_size).items():
            self._metrics[mode][f"reward_stats/{key}"].append(float(val))
        return output, ScoredRollouts(rewards, token_entropy)

    # -- the loss ------------------------------------------------------------------------------------------

    def _compute_loss(self, model, inputs):
        if self.model.training:
            self._step_batches.append(inputs)
        if self.trl_loss is not None:  # TRL's own loss, with the advantages we attached
            loss = super()._compute_loss(model, inputs)
            if self.model.training:
                bad = self._any_process(not bool(torch.isfinite(loss.detach())))
                loss = self._check_loss(loss, bad, inputs)
                if not bad:
                    self._note_loss(loss)
            return loss
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        mask = completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        temp_logps = None
        if "old_temp_logps" in inputs:  # scored at generation time: pi_old^T even after the policy moved
            temp_logps = {t: inputs["old_temp_logps"][..., k] for k, t in enumerate(self.loss_temperatures)}
        # on-policy: this forward pass is pi_old, so it also gives log pi_old^T
        want_temps = bool(self.loss_temperatures) and temp_logps is None
        logps, entropies, fwd_temps, values = self._policy_forward(
            model, input_ids, attention_mask, completion_ids, completion_mask, prompt_ids.size(1),
            want_temps=want_temps, want_values="values" in self.loss_extras,
        )
        if want_temps:
            temp_logps = fwd_temps
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
            "rollout_flags": inputs.get("rollout_flags"),
            "rollout_temps": inputs.get("rollout_temps"),
            "values": values,
            # computed once per rollout batch in training; a loss called without them (evaluation) computes them
            # from its own rows
            "batch_stats": get_batch_stats(inputs) if self.model.training else None,
        }
        extras = {}
        for name in self.loss_extras:
            if available.get(name) is None and name != "batch_stats":
                raise KeyError(f"loss {self.loss_name!r} requires {name!r}, which this batch does not carry")
            extras[name] = available[name]
        loss, metrics = self.loss_fn(
            logps, old_logps, mask.to(logps.dtype), inputs["advantages"], **self._loss_call_kwargs, **extras
        )

        mode = "train" if self.model.training else "eval"
        with torch.no_grad():
            fmask = mask.to(entropies.dtype)
            n_tok = fmask.sum().clamp(min=1.0)
            nonfinite = (~torch.isfinite(loss.detach())).to(fmask.dtype)
            local = torch.stack([(entropies * fmask).sum() / n_tok, -(logps * fmask).sum() / n_tok, nonfinite]).float()
            full_all, nll_all, bad_any = self.accelerator.gather(local[None]).mean(dim=0).tolist()
        bad = bad_any > 0  # the loss is non-finite on some process (one collective with the entropies')
        if mode == "train":  # before backward: a non-finite loss raises here, or its step is skipped
            loss = self._check_loss(loss, bad, inputs, logps)
        self._metrics[mode]["entropy"].append(full_all)
        self._metrics[mode]["entropy_nll"].append(nll_all)
        if mode == "train":
            self.entropy.add(nll_all, full_all)
        if not (bad and mode == "train"):  # a skipped micro-batch's loss and metrics stay out of the logs
            self._metrics[mode]["loss/value"].append(float(loss.detach()))
            if mode == "train":
                self._note_loss(loss)
            for key, val in metrics.items():
                self._metrics[mode][key].append(float(val))
        if mode == "train":
            loss = loss / self.current_gradient_accumulation_steps
        return loss

    def _policy_forward(self, model, input_ids, attention_mask, completion_ids, completion_mask, prompt_len: int,
                        *, want_temps: bool, want_values: bool):
        """The loss's forward pass, in length-sorted chunks of ``forward_chunk_rows`` rows (see ``__init__``).

        input_ids, attention_mask: (B, P + C); completion_ids, completion_mask: (B, C).
        Returns logps (B, C), entropies (B, C), {T: (B, C)} log pi^T or None, values (B,) or None; positions a
        chunk trimmed are 0 (their mask is 0). Why chunks: one padded forward of 64 rows whose completions run
        100-448 tokens cost 2.5x the chunked one (8 rows per chunk) on CPU (bench/forward_chunks.py), from padding
        and from attention and activations that no longer fit in cache.
        """
        B, C = completion_ids.shape
        rows = self.forward_chunk_rows
        if rows is None or rows >= B:
            return self._forward_rows(model, input_ids, attention_mask, completion_ids, prompt_len,
                                      want_temps=want_temps, want_values=want_values)
        # a row's length is up to its last attended completion token; later columns are padding
        col = torch.arange(1, C + 1, device=completion_mask.device)
        lengths = (completion_mask.to(torch.long) * col).amax(dim=1)
        order = torch.argsort(lengths, stable=True)
        parts = []
        for s in range(0, B, rows):
            idx = order[s:s + rows]
            w = max(int(lengths[idx].max()), 1)
            out = self._forward_rows(model, input_ids[idx, :prompt_len + w], attention_mask[idx, :prompt_len + w],
                                     completion_ids[idx, :w], prompt_len, want_temps=want_temps,
                                     want_values=want_values)
            parts.append(out)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(B, device=order.device)

        def stitch(tensors):
            return torch.cat([torch.nn.functional.pad(x, (0, C - x.size(1))) for x in tensors])[inverse]

        logps = stitch([p[0] for p in parts])
        entropies = stitch([p[1] for p in parts])
        temps = {t: stitch([p[2][t] for p in parts]) for t in self.loss_temperatures} if want_temps else None
        values = torch.cat([p[3] for p in parts])[inverse] if want_values else None
        return logps, entropies, temps, values

    def _forward_rows(self, model, input_ids, attention_mask, completion_ids, prompt_len: int, *, want_temps: bool,
                      want_values: bool, compute_entropy: bool = True):
        """One forward pass over these rows: TRL's log-probs (and entropies), plus what the hidden state gives."""
        need_hidden = want_temps or want_values
        with HiddenStateCapture(model) if need_hidden else nullcontext() as cap:
            logps, entropies, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=compute_entropy
            )
        temps = self._temperature_logps(cap, completion_ids) if want_temps else None
        values = None
        if want_values:
            # prompts are left-padded: column P-1 is every row's last prompt token
            head = getattr(self.accelerator.unwrap_model(model), self.VALUE_HEAD)
            values = head(cap.hidden[:, prompt_len - 1].detach().float()).squeeze(-1)
        return logps, entropies, temps, values

    def _temperature_logps(self, cap: HiddenStateCapture, completion_ids: torch.Tensor) -> dict[float, torch.Tensor]:
        """{T: (B, C) log pi^T(y_t)} from the captured hidden states (C completion tokens), chunked, detached."""
        if cap.hidden is None:
            raise RuntimeError("the forward pass did not expose the backbone's hidden states")
        cfg = self.model.config.get_text_config()
        C = completion_ids.size(1)
        hidden = cap.hidden[:, -C - 1 : -1]  # position k-1 predicts completion token k
        head = cap.lm_head
        # The head's weight is read directly, not through its forward, so under DeepSpeed ZeRO-3 it is still a
        # partitioned (0,)-shaped shard here: gather it as TRL's own fused log-prob head does (a null context
        # without ZeRO-3). The values are constants (no_grad), so nothing needs the gather in the backward.
        with maybe_gather_lm_head_ctx(head.weight, head.bias):
            out = chunked_logprobs(hidden, head.weight, completion_ids, temperatures=self.loss_temperatures,
                                   bias=head.bias, compute_entropy=False,
                                   softcap=getattr(cfg, "final_logit_softcapping", None),
                                   chunk_size=self.logprob_chunk_size)
        return {t: lp for t, (lp, _ent) in out.items()}


ROLLOUT_POLICIES = ("current", "reference")


def make_rollout_func(sample_fn: Callable[..., list[list[int]]], *, policy: str = "current") -> Callable:
    """Adapt a token sampler to TRL's ``rollout_func`` hook (so generation can be swapped without forking TRL).

    ``sample_fn(model, tokenizer, prompts, *, n, temperature, top_p, max_new_tokens)`` returns one list of
    completion ids per prompt row; TRL has already repeated each prompt ``num_generations`` times, so ``n=1``.
    ``temperature`` and ``top_p`` are the trainer's (GRPOConfig's, as TRL's own ``model.generate`` path uses them).
    ``policy="current"`` samples from the policy being trained (online RL); ``"reference"`` from TRL's frozen
    reference model (needs ``beta != 0`` so TRL builds one): samples of a fixed policy mu, i.e. DRO's offline
    setting with fresh i.i.d. draws instead of a stored data set.
    """
    if policy not in ROLLOUT_POLICIES:
        raise ValueError(f"rollout policy {policy!r}; valid: {', '.join(ROLLOUT_POLICIES)}")

    def rollout_func(prompts: list[str], trainer: GRPOTrainer) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        if policy == "reference":
            if trainer.ref_model is None:
                raise ValueError("rollout policy 'reference' needs TRL's reference model: set beta != 0 in GRPOConfig")
            model = trainer.accelerator.unwrap_model(trainer.ref_model)
        else:
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
                top_p=trainer.top_p,
                max_new_tokens=trainer.max_completion_length,
            )
        finally:
            model.train(was_training)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    return rollout_func
