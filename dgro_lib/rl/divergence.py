"""Divergence stops with its evidence: a non-finite reward, loss or gradient norm stops the run (or, opt-in, skips
the step) after saving the offending rollout batch. A mixin of :class:`dgro_lib.rl.trainer.DGROTrainer`, placed before
``trl.GRPOTrainer`` in its bases so that its ``_get_grad_norm`` and ``log`` wrap the Trainer's.

Where each check sits: the reward right after TRL scores and gathers it (``_check_rewards``, called from
``DGROTrainer._calculate_rewards``); the loss before backward (``_check_loss``, called from ``_compute_loss``);
the gradient norm in ``_get_grad_norm``, which transformers calls after clipping and before ``optimizer.step()``
(under DeepSpeed the optimizer steps inside backward, so there only the loss check stops it in time).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import torch

__all__ = ["DivergenceGuard", "NonFiniteError"]

logger = logging.getLogger(__name__)


class NonFiniteError(FloatingPointError):
    """Training diverged: a reward, loss or gradient norm is NaN or infinite at ``step`` (the optimizer step it
    would have become, 1-based). ``quantity`` is ``"reward"``, ``"loss"`` or ``"gradient norm"``; ``path`` the
    evidence file (the offending rollout batch, see :meth:`DGROTrainer._save_evidence`)."""

    def __init__(self, message: str, *, step: int, quantity: str, path: Path):
        super().__init__(message)
        self.step, self.quantity, self.path = step, quantity, path


def _json_safe(obj):
    """Non-finite floats as strings ("nan", "inf", "-inf"), so the evidence JSON is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


class DivergenceGuard:
    """Checks for non-finite rewards, losses and gradient norms, and the evidence they leave (see the module)."""

    def _init_divergence_guard(self, skip_nonfinite: bool) -> None:
        self.skip_nonfinite = bool(skip_nonfinite)
        self._nonfinite_skipped = 0  # optimizer steps skipped so far (logged as nonfinite/skipped)
        self._step_nonfinite: str | None = None  # skip mode: why the current optimizer step is skipped
        self._rollout_nonfinite: str | None = None  # skip mode: the current rollout batch has a non-finite reward
        self._step_batches: list[dict] = []  # the micro-batches of the current optimizer step (the evidence)

    def _check_rewards(self, rewards_per_func, prompts, completions, completion_ids_list) -> None:
        """Stop (or, with ``skip_nonfinite``, mark this rollout batch's steps skipped) when a reward is non-finite.

        rewards_per_func: (N, n_funcs), gathered over every process (so all processes decide alike). Non-finite
        means +-inf anywhere, or a row without any finite reward. A NaN next to another function's finite reward is
        TRL's "this function does not apply" (a reward function's ``None``; the weighted sum skips it) and passes.
        """
        finite = torch.isfinite(rewards_per_func)
        bad_rows = torch.isinf(rewards_per_func).any(dim=1) | ~finite.any(dim=1)
        if not bool(bad_rows.any()):
            return
        step = self.state.global_step + 1
        n_funcs = rewards_per_func.size(1)
        names = [self.reward_func_names[i] for i in range(n_funcs) if bool((~finite[bad_rows, i]).any())]
        values = sorted({str(v) for v in rewards_per_func[~finite].tolist()})
        rows = bad_rows.nonzero().flatten().tolist()
        detail = (f"reward function {', '.join(map(repr, names))} returned {', '.join(values)} for {len(rows)} of "
                  f"{rewards_per_func.size(0)} completions (rows {rows[:16]}{' ...' if len(rows) > 16 else ''})")
        n_local = len(prompts)
        start = self.accelerator.process_index * n_local
        local = rewards_per_func[start:start + n_local].detach().cpu()
        evidence_rows = [
            {"prompt": p, "completion": c, "completion_ids": [int(t) for t in ids],
             "rewards": {name: float(local[i, j]) for j, name in enumerate(self.reward_func_names)}}
            for i, (p, c, ids) in enumerate(zip(prompts, completions, completion_ids_list))
        ]
        path = self._save_evidence(step, "reward", detail, rows=evidence_rows, tensors={
            "rewards_per_func": rewards_per_func.detach().cpu(), "rewards_per_func_local": local,
            "reward_func_names": list(self.reward_func_names), "local_rows_start": start,
            "completion_ids": [[int(t) for t in ids] for ids in completion_ids_list],
            "prompts": list(prompts), "completions": list(completions)})
        self._nonfinite(step, "reward", detail, path)
        self._rollout_nonfinite = "reward"

    def _check_loss(self, loss: torch.Tensor, bad: bool, inputs: dict, logps: torch.Tensor | None = None):
        """The loss of one training micro-batch, before backward. ``bad``: non-finite on some process (all-reduced,
        so every process stops or skips together). Raises :class:`NonFiniteError`, or (``skip_nonfinite``) marks the
        optimizer step skipped and returns a zero loss whose gradient is 0 (the step's gradients are dropped anyway)."""
        if self._rollout_nonfinite is not None and self._step_nonfinite is None:
            self._step_nonfinite = self._rollout_nonfinite
        if not bad:
            return loss
        step = self.state.global_step + 1
        if self._step_nonfinite is None:
            value = float(loss.detach())
            where = "" if not math.isfinite(value) else " on another process (this one's is finite)"
            detail = f"loss {self.loss_name!r} = {value}{where}"
            path = self._save_evidence(step, "loss", detail, batches=[inputs],
                                       tensors={"logps": None if logps is None else logps.detach().cpu()})
            self._nonfinite(step, "loss", detail, path)
            self._step_nonfinite = "loss"
        return torch.nan_to_num(loss, nan=0.0, posinf=0.0, neginf=0.0)

    def _any_process(self, flag: bool) -> bool:
        t = torch.tensor([float(flag)], device=self.accelerator.device)
        return bool(self.accelerator.reduce(t, reduction="sum").item() > 0)

    def _get_grad_norm(self, model, grad_norm=None):
        """transformers calls this once per optimizer step, after clipping and before ``optimizer.step()``: a
        non-finite (pre-clip) norm stops the run here, so the step's update is never applied; a skipped step
        (``skip_nonfinite``) drops its gradients, so the optimizer moves nothing (no Adam moment update, no weight
        decay). The norm is the global one (after DDP's all-reduce), so every process decides alike. DeepSpeed steps
        inside backward: there this check comes after the update (the loss check still precedes it)."""
        grad_norm = super()._get_grad_norm(model, grad_norm=grad_norm)
        step = self.state.global_step + 1
        skip = self._step_nonfinite
        batches, self._step_batches, self._step_nonfinite = self._step_batches, [], None
        try:
            value = float(grad_norm)
        except (TypeError, ValueError, RuntimeError):
            value = 0.0  # a norm we cannot read is not checked
        if skip is None and not math.isfinite(value):
            detail = f"gradient norm = {value} (before clipping)"
            path = self._save_evidence(step, "gradient norm", detail, batches=batches)
            self._nonfinite(step, "gradient norm", detail, path)
            skip = "gradient norm"
        if skip is not None:
            model.zero_grad(set_to_none=True)
            if self.optimizer is not None:
                self.optimizer.zero_grad(set_to_none=True)
            self._nonfinite_skipped += 1
        return grad_norm

    def _nonfinite(self, step: int, quantity: str, detail: str, path: Path) -> None:
        """Raise :class:`NonFiniteError` (default) or log that the step is skipped (``skip_nonfinite``)."""
        ckpts = sorted(Path(self.args.output_dir).glob("checkpoint-*"),
                       key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1)
        last = f"the last good checkpoint is {ckpts[-1]}" if ckpts else "no checkpoint was saved before it"
        msg = (f"non-finite {quantity} at step {step}: {detail}. The rollout batch is saved in {path} "
               f"(and {path.with_suffix('.json')})")
        if self.skip_nonfinite:
            logger.warning("%s; skipping step %d (skip_nonfinite)", msg, step)
            return
        raise NonFiniteError(f"{msg}; step {step}'s update was not applied and {last}.", step=step,
                             quantity=quantity, path=path)

    def _save_evidence(self, step: int, quantity: str, detail: str, *, batches=(), rows=None,
                       tensors: dict | None = None) -> Path:
        """Write the offending batch to ``<output_dir>/nonfinite_step<step>.pt`` (``_rank<k>`` appended on process k
        > 0 of a multi-process run) and a readable ``.json`` next to it; returns the ``.pt`` path.

        The ``.pt`` (``torch.load``-able with ``weights_only=True``) holds ``step``, ``quantity``, ``detail``,
        ``loss_name``, ``rank``, ``world_size``, ``batches`` (each micro-batch dict of the step as the loss saw it, on
        CPU: prompt/completion ids and masks, ``advantages``, raw ``rewards``, ``group_ids``, ``old_per_token_logps``,
        ... whatever it holds), ``rows`` (per completion: decoded prompt and completion, reward, advantage, group
        id, token count, and which of the batch's tensors are non-finite in that row) and ``tensors`` (the check's
        own: the reward check's per-function rewards of every process with the decoded texts, the loss check's
        current per-token log-probs). The ``.json`` has the same minus the tensors (``shapes`` lists them).
        """
        out = Path(self.args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        rank = self.accelerator.process_index
        stem = f"nonfinite_step{step}" + (f"_rank{rank}" if self.accelerator.num_processes > 1 else "")
        saved_batches = []
        for b in batches:
            saved_batches.append({k: (v.detach().cpu() if torch.is_tensor(v) else v) for k, v in b.items()
                                  if torch.is_tensor(v) or v is None or isinstance(v, (int, float, str, bool))})
        if rows is None:
            rows = [r for b in saved_batches for r in self._evidence_rows(b)]
        tensors = {k: v for k, v in (tensors or {}).items() if v is not None}
        payload = {"step": step, "quantity": quantity, "detail": detail, "loss_name": self.loss_name, "rank": rank,
                   "world_size": self.accelerator.num_processes, "batches": saved_batches, "rows": rows,
                   "tensors": tensors}
        path = out / f"{stem}.pt"
        torch.save(payload, path)
        shapes = {f"batches[{i}].{k}": list(v.shape) for i, b in enumerate(saved_batches) for k, v in b.items()
                  if torch.is_tensor(v)}
        shapes.update({f"tensors.{k}": list(v.shape) for k, v in tensors.items() if torch.is_tensor(v)})
        scalars = {k: (v.tolist() if torch.is_tensor(v) else v) for k, v in tensors.items()
                   if not torch.is_tensor(v) or v.numel() <= 4096}
        summary = {k: payload[k] for k in ("step", "quantity", "detail", "loss_name", "rank", "world_size")}
        with open(path.with_suffix(".json"), "w") as f:
            json.dump(_json_safe({**summary, "shapes": shapes, "rows": rows, "tensors": scalars}), f, indent=1,
                      default=str)
        return path

    def _evidence_rows(self, batch: dict) -> list[dict]:
        """One readable record per completion of a micro-batch: decoded texts and the row's scalars."""
        tok = self._tokenizer
        pids, pm = batch.get("prompt_ids"), batch.get("prompt_mask")
        cids, cm = batch.get("completion_ids"), batch.get("completion_mask")
        if cids is None or cm is None:
            return []
        B = cids.size(0)
        rows = []
        for i in range(B):
            row = {"completion": tok.decode(cids[i][cm[i].bool()].tolist()), "completion_tokens": int(cm[i].sum())}
            if pids is not None and pm is not None:
                row["prompt"] = tok.decode(pids[i][pm[i].bool()].tolist())
            for key in ("rewards", "advantages", "group_ids", "rollout_flags", "rollout_temps"):
                v = batch.get(key)
                if torch.is_tensor(v) and v.dim() == 1 and v.size(0) == B:
                    row[key] = v[i].item()
            old = batch.get("old_per_token_logps")
            if torch.is_tensor(old) and old.shape == cm.shape:
                row["old_logp_sum"] = float((old[i].float() * cm[i].float()).nansum())
            row["nonfinite_in"] = sorted(k for k, v in batch.items() if torch.is_tensor(v) and v.is_floating_point()
                                         and v.dim() >= 1 and v.size(0) == B and not bool(torch.isfinite(v[i]).all()))
            rows.append(row)
        return rows

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.skip_nonfinite and self.model.training and "loss" in logs:
            logs["nonfinite/skipped"] = float(self._nonfinite_skipped)
        super().log(logs, start_time)

