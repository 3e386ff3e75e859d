"""Loading an experiment config from ``params/<profile>/<experiment>.yaml``: strict parsing into the schema's
dataclasses, the cross-field checks, dotted overrides and the sweep's expansion.

Loading is strict: an unknown key, a missing required key or a value of the wrong type raises
:class:`~dgro_lib.util.typed.ConfigError` naming the file and the dotted key, so a typo in a YAML never silently
falls back to a default.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import os
from pathlib import Path
from typing import Any

import yaml

from dgro_lib.config.checks import validate_values
from dgro_lib.config.schema import DISTRIBUTED, KINDS, ExperimentConfig
from dgro_lib.data.math import ALL_KINDS, SYNTHETIC, resolve_dataset
from dgro_lib.losses import list_losses, loss_entry
from dgro_lib.rewards import get_scheme
from dgro_lib.util.paths import PARAMS
from dgro_lib.util.typed import ConfigError, build_dataclass

__all__ = ["load_config", "config_from_dict", "config_to_dict", "apply_overrides", "expand_sweep", "find_params",
           "PARAMS_DIR_ENV",
           "SWEEP_JOIN", "point_keys", "sweep_entries"]


def config_from_dict(data: dict, *, source: str = "<dict>") -> ExperimentConfig:
    """Build an :class:`ExperimentConfig` from a plain mapping; errors are prefixed by ``source``."""
    try:
        cfg = build_dataclass(ExperimentConfig, data, "")
        _validate(cfg)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    return cfg


def _validate(cfg: ExperimentConfig) -> None:
    """Cross-field checks that the types alone cannot express."""
    knobs = cfg.knobs  # builds the notebook's typed extra section: a missing or misspelled knob raises here
    labels = getattr(knobs, "labels", None)
    if labels is not None:  # every arm a knob names is one of the labels (their count against the sweep is checked
        # where a sweep is labelled, dgro_lib.analysis.dcpo.sweep_labels: a notebook may narrow another's sweep)
        if len(set(labels)) != len(labels):
            raise ConfigError(f"extra.labels: duplicated labels in {labels}")
        for role in ("control", "control_of", "grpo", "online_dpo"):  # the knobs that name an arm
            if hasattr(knobs, role) and getattr(knobs, role) not in labels:
                raise ConfigError(f"extra.{role}: {getattr(knobs, role)!r} is not one of extra.labels {labels}")
        for arm in getattr(knobs, "counted_elsewhere", []):
            if arm not in labels:
                raise ConfigError(f"extra.counted_elsewhere: {arm!r} is not one of extra.labels {labels}")
    greedy = getattr(knobs, "greedy_eval", None)
    if greedy is not None and greedy.temperature != 0:  # read and labelled as greedy accuracy (McNemar on 0/1)
        raise ConfigError(f"extra.greedy_eval.temperature: the greedy reading must have temperature 0, got "
                          f"{greedy.temperature}")
    if not cfg.seeds:
        raise ConfigError("seeds: at least one seed is required")
    if cfg.kind not in KINDS:
        raise ConfigError(f"kind: {cfg.kind!r} is not one of {', '.join(KINDS)}")
    if cfg.workers < 1:
        raise ConfigError(f"workers: must be >= 1, got {cfg.workers}")
    t = cfg.train
    for key in ("max_steps", "prompts_per_step", "num_generations", "num_iterations", "max_completion_length"):
        if getattr(t, key) < 1:
            raise ConfigError(f"train.{key}: must be >= 1, got {getattr(t, key)}")
    if t.temperature <= 0:
        raise ConfigError(f"train.temperature: must be > 0, got {t.temperature}")
    if t.num_processes < 1:
        raise ConfigError(f"train.num_processes: must be >= 1, got {t.num_processes}")
    if t.num_processes > 1 and cfg.workers > 1:
        raise ConfigError(f"workers: {cfg.workers} parallel runs with train.num_processes = {t.num_processes} each "
                          "would share the same GPUs; use workers: 1 (each run takes all its processes)")
    if t.updates_per_rollout < 1:
        raise ConfigError(f"train.updates_per_rollout: must be >= 1, got {t.updates_per_rollout}")
    per_batch = t.num_iterations * t.updates_per_rollout  # optimizer steps one rollout batch feeds
    if t.max_steps % per_batch:
        raise ConfigError(f"train.max_steps: {t.max_steps} optimizer steps is not a whole number of rollout batches: "
                          f"each feeds train.num_iterations x train.updates_per_rollout = {t.num_iterations} x "
                          f"{t.updates_per_rollout} = {per_batch} steps (passes x mini-batches)")
    rows = t.prompts_per_step * t.num_generations
    if rows % (t.num_processes * t.updates_per_rollout):
        raise ConfigError(f"train.num_processes x train.updates_per_rollout = {t.num_processes} x "
                          f"{t.updates_per_rollout} does not divide the rollout batch prompts_per_step x "
                          f"num_generations = {rows}")
    if t.micro_batch_size is not None and (t.micro_batch_size < 1 or (
            rows // (t.num_processes * t.updates_per_rollout)) % t.micro_batch_size):
        raise ConfigError(f"train.micro_batch_size: {t.micro_batch_size} must divide the rows of one optimizer "
                          f"step on one process, {rows // (t.num_processes * t.updates_per_rollout)}")
    if t.forward_chunk_rows is not None and t.forward_chunk_rows < 1:
        raise ConfigError(f"train.forward_chunk_rows: must be >= 1 or null, got {t.forward_chunk_rows}")
    if not 0 < t.top_p <= 1:
        raise ConfigError(f"train.top_p: must be in (0, 1], got {t.top_p}")
    if cfg.data.task not in ("kk", "math"):
        raise ConfigError(f"data.task: {cfg.data.task!r} is not one of kk, math")
    if cfg.data.task == "math" and not cfg.data.math_train:
        raise ConfigError("data.math_train: task 'math' needs a training set (e.g. deepscaler, orz, dapo17k)")
    if cfg.data.math_kinds is not None:
        if cfg.data.task != "math" or SYNTHETIC not in [cfg.data.math_train, *cfg.data.math_eval]:
            raise ConfigError(f"data.math_kinds: only read by the {SYNTHETIC!r} math generator (task 'math')")
        unknown = [k for k in cfg.data.math_kinds if k not in ALL_KINDS]
        if unknown or not cfg.data.math_kinds:
            raise ConfigError(f"data.math_kinds: {cfg.data.math_kinds!r} must be a non-empty list of "
                              f"{', '.join(ALL_KINDS)}")
    if cfg.data.task == "math":
        if not cfg.data.math_eval:
            raise ConfigError(f"data.math_eval: task 'math' needs at least one evaluation set (a benchmark, or "
                              f"{SYNTHETIC!r} for generated problems)")
        for key, names in (("data.math_train", [cfg.data.math_train]), ("data.math_eval", cfg.data.math_eval)):
            for n in names:
                generated = cfg.data.source == "generated"
                if n == SYNTHETIC or generated:
                    if n != SYNTHETIC or not generated:
                        raise ConfigError(f"{key}: {n!r} with data.source {cfg.data.source!r}: the offline generator "
                                          f"({SYNTHETIC!r}) goes with source 'generated', a data set with 'hub' or "
                                          "'official'")
                    continue
                try:
                    resolve_dataset(n)
                except ValueError as e:
                    raise ConfigError(f"{key}: {e}") from None
    if t.distributed not in DISTRIBUTED:
        raise ConfigError(f"train.distributed: {t.distributed!r} is not one of {', '.join(DISTRIBUTED)}")
    if t.vllm_mode not in ("colocate", "server"):
        raise ConfigError(f"train.vllm_mode: {t.vllm_mode!r} is not one of colocate, server")
    if t.rollout_policy not in ("current", "reference"):
        raise ConfigError(f"train.rollout_policy: {t.rollout_policy!r} is not one of current, reference")
    if t.rollout_policy == "reference" and not t.fast_sampler:
        raise ConfigError("train.rollout_policy: 'reference' samples through the rollout_func hook; set train.fast_sampler: true")
    e = cfg.eval
    if e.temperature < 0:
        raise ConfigError(f"eval.temperature: must be >= 0 (0 = greedy), got {e.temperature}")
    if not 0 < e.top_p <= 1:
        raise ConfigError(f"eval.top_p: must be in (0, 1], got {e.top_p}")
    if e.n_samples < 1 or e.max_new_tokens < 1 or e.batch_size < 1:
        raise ConfigError(f"eval.n_samples, eval.max_new_tokens, eval.batch_size: must be >= 1, got "
                          f"{e.n_samples}, {e.max_new_tokens}, {e.batch_size}")
    if e.temperature == 0 and e.n_samples != 1:
        raise ConfigError(f"eval.n_samples: greedy decoding (eval.temperature 0) gives one answer, got {e.n_samples}")
    if e.engine not in ("hf", "vllm"):
        raise ConfigError(f"eval.engine: {e.engine!r} is not one of hf, vllm")
    if e.engine == "vllm" and cfg.kind == "train" and cfg.train.num_processes == 1:
        raise ConfigError("eval.engine: vllm evaluates outside the training processes, which only multi-process runs "
                          "(train.num_processes > 1) do; a one-process run evaluates in its own process with the "
                          "KV-cache sampler, so its results would mix engines: use eval.engine: hf")
    if e.engine == "vllm" and cfg.train.max_prompt_length is None:
        raise ConfigError("eval.engine: vllm reserves KV cache for train.max_prompt_length + eval.max_new_tokens "
                          "tokens, and train.max_prompt_length is unset (vLLM would reserve the model's whole "
                          "context); set train.max_prompt_length")
    bad_k = [k for k in e.ks if not 1 <= k <= e.n_samples]
    if not e.ks or bad_k:
        raise ConfigError(f"eval.ks: every k must satisfy 1 <= k <= eval.n_samples={e.n_samples}, got {e.ks}")
    if cfg.data.source not in ("generated", "official", "hub"):
        raise ConfigError(f"data.source: {cfg.data.source!r} is not one of generated, official, hub")
    if cfg.loss.name not in list_losses():
        raise ConfigError(f"loss.name: {cfg.loss.name!r} is not a registered loss; valid: {', '.join(list_losses())}")
    if cfg.loss.value not in ("group_mean", "soft"):
        raise ConfigError(f"loss.value: {cfg.loss.value!r} is not one of group_mean, soft")
    try:
        loss_entry(cfg.loss.name).validate(cfg.loss.kwargs)
    except ValueError as e:
        bad = sorted(k for k in cfg.loss.kwargs if k not in loss_entry(cfg.loss.name).kwarg_names)
        raise ConfigError(f"loss.kwargs.{bad[0]}: {e}") from None
    if cfg.loss.value == "soft":
        try:
            loss_entry(cfg.loss.name).soft_beta(cfg.loss.kwargs)
        except (ValueError, TypeError) as e:  # TypeError: a kwarg of the wrong type (named again below)
            raise ConfigError(f"loss.value: {e}") from None
    if cfg.loss.scale not in (None, "group_std"):
        raise ConfigError(f"loss.scale: {cfg.loss.scale!r} is not one of null, group_std")
    if cfg.reward.scheme == "custom" and (cfg.reward.coefficients is None or len(cfg.reward.coefficients) != 3):
        raise ConfigError("reward.coefficients: scheme 'custom' needs three coefficients [c_f, c_corr, c_com]")
    if cfg.reward.scheme != "custom":
        try:
            get_scheme(cfg.reward.scheme)
        except ValueError as e:
            raise ConfigError(f"reward.scheme: {e}") from None
    validate_values(cfg)  # ranges, finiteness, allowed values, paths: ConfigError naming the key and value
    _sweep_axes(cfg)  # unknown dotted key, repeated key, empty list, wrong tuple length: ConfigError naming it
    if cfg.sweep:  # every sweep point is checked like a file of its own (ConfigError names the point)
        expand_sweep(cfg)


def config_to_dict(cfg: ExperimentConfig) -> dict:
    """Plain-dict form (what the run manifest stores)."""
    return dataclasses.asdict(cfg)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Load a params YAML strictly, then apply ``overrides`` (dotted key -> value, e.g. from a notebook cell)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    cfg = config_from_dict(data, source=str(path))
    if overrides:
        cfg = apply_overrides(cfg, overrides, source=f"{path} (overrides)")
    return cfg


def _get_dotted(cfg: Any, key: str) -> Any:
    obj = cfg
    for part in key.split("."):
        if dataclasses.is_dataclass(obj) and part in {f.name for f in dataclasses.fields(obj)}:
            obj = getattr(obj, part)
        elif isinstance(obj, dict):
            obj = obj.get(part)
        else:
            raise ConfigError(f"unknown key {key}")
    return obj


def apply_overrides(cfg: ExperimentConfig, overrides: dict[str, Any], *, source: str = "overrides") -> ExperimentConfig:
    """Return a copy of ``cfg`` with dotted keys replaced, re-validated as strictly as a YAML file."""
    data = config_to_dict(cfg)
    for key, value in overrides.items():
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node, dict) or part not in node:
                raise ConfigError(f"{source}: unknown key {key}")
            node = node[part] if node[part] is not None else node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: unknown key {key}")
        # loss.kwargs / extra are free-form mappings; every other level must already know the key
        if parts[-1] not in node and parts[-2:-1] not in (["kwargs"], ["extra"], ["peft"]):
            raise ConfigError(f"{source}: unknown key {key}")
        node[parts[-1]] = copy.deepcopy(value)
    return config_from_dict(data, source=source)


SWEEP_JOIN = "|"
"""Joins dotted keys into one sweep key whose values vary together (see ``ExperimentConfig.sweep``)."""


def point_keys(*sweep_keys: str) -> list[str]:
    """The dotted keys that ``sweep_keys`` set in each sweep point (the columns a run's row carries), in order: each
    key's ``|``-joined parts, stripped, less ``seeds`` (a point's own seeds say how many runs it has and are not part
    of the point: :func:`expand_sweep`)."""
    return [k.strip() for key in sweep_keys for k in key.split(SWEEP_JOIN) if k.strip() != "seeds"]


def sweep_entries(cfg: ExperimentConfig, key: str) -> list[dict[str, Any]]:
    """The entries of ``cfg.sweep[key]`` as the part of a sweep point each sets (``{dotted key: value}``, in order;
    an entry's own ``seeds`` left out, as :func:`expand_sweep` leaves them out of the point)."""
    axis = _sweep_axes(cfg)[list(cfg.sweep).index(key)]
    return [{k: v for k, v in entry.items() if k != "seeds"} for entry in axis]


def _sweep_axes(cfg: ExperimentConfig) -> list[list[dict[str, Any]]]:
    """One axis per sweep key: its values as ``{dotted key: value}`` dicts (a ``|`` key zips its dotted keys).

    Raises ConfigError naming the sweep key for an unknown or repeated dotted key, an empty list, or an entry of
    a ``|`` key that is not a list of one value per dotted key.
    """
    axes: list[list[dict[str, Any]]] = []
    owner: dict[str, str] = {}
    for skey, values in cfg.sweep.items():
        where = f"sweep.{skey}"
        keys = [k.strip() for k in skey.split(SWEEP_JOIN)]
        if keys == ["seeds"]:  # two points alike but for their seeds would be one point twice
            raise ConfigError(f"{where}: seeds vary only with a point's other keys: join them with "
                              f"{SWEEP_JOIN!r} (e.g. 'loss{SWEEP_JOIN}seeds'), or list them in the top-level seeds")
        for k in keys:
            if not k:
                raise ConfigError(f"{where}: empty dotted key (keys joined by {SWEEP_JOIN!r} must all be named)")
            try:
                _get_dotted(cfg, k)
            except ConfigError:
                raise ConfigError(f"{where}: unknown key {k}") from None
            clash = next((o for o in owner if o == k or o.startswith(k + ".") or k.startswith(o + ".")), None)
            if clash is not None:  # the same key, or one inside the other: the result would depend on the order
                raise ConfigError(f"{where}: {k} is already swept by sweep.{owner[clash]}"
                                  + ("" if clash == k else f" (as {clash})"))
            owner[k] = skey
        if not values:
            raise ConfigError(f"{where}: empty list (a sweep key needs at least one value)")
        if len(keys) == 1:
            axes.append([{keys[0]: v} for v in values])
            continue
        axis = []
        for i, v in enumerate(values):
            if not isinstance(v, (list, tuple)) or len(v) != len(keys):
                raise ConfigError(f"{where}[{i}]: expected a list of {len(keys)} values, one per key "
                                  f"({', '.join(keys)}), got {v!r:.200}")
            axis.append(dict(zip(keys, v)))
        axes.append(axis)
    return axes


def expand_sweep(cfg: ExperimentConfig) -> list[tuple[dict[str, Any], int, ExperimentConfig]]:
    """All runs of an experiment: (sweep point, seed, concrete config) for the product of ``sweep`` x ``seeds``.
    A sweep key that joins ``seeds`` to other keys gives each of its entries its own seeds (the arms that need more
    seeds for a target MDE get them, the others keep ``seeds``); ``seeds`` is then left out of the point.

    Each sweep key is one axis of the product; a key of dotted keys joined by ``|`` is one axis whose entries set
    all of them together. A point maps every swept dotted key to its value, in the order of ``sweep``.
    """
    points = [{k: v for part in combo for k, v in part.items()}
              for combo in itertools.product(*_sweep_axes(cfg))] or [{}]
    runs = []
    for point in points:
        # a point's own seeds (a ``seeds`` joined into a sweep key) replace the top-level list for its runs; they
        # are how many runs the point has, not what a run computes, so they are not part of the point
        seeds = point.pop("seeds", None)
        over = {**point, "sweep": {}} | ({"seeds": seeds} if seeds is not None else {})
        concrete = apply_overrides(cfg, over, source=f"sweep point {point}" + (" (its seeds)" if seeds else ""))
        for seed in concrete.seeds:
            runs.append((point, seed, concrete))
    return runs


# A folder laid out as params/ (``<profile>/<name>.yaml``) whose files take the place of the repository's for the
# profiles it holds: how a rehearsal (dgro_lib.cli.rehearse) hands its shrunk params to the notebooks it executes.
PARAMS_DIR_ENV = "DGRO_PARAMS_DIR"


def find_params(experiment: str, profile: str, root: str | Path | None = None) -> Path:
    """``params/<profile>/<experiment>.yaml`` under the repo (or ``root``; or, without ``root``, the folder that the
    environment variable ``DGRO_PARAMS_DIR`` names when it holds ``<profile>/``); a clear error lists what exists."""
    if root is None and os.environ.get(PARAMS_DIR_ENV) and (Path(os.environ[PARAMS_DIR_ENV]) / profile).is_dir():
        root = os.environ[PARAMS_DIR_ENV]
    root = Path(root) if root is not None else PARAMS
    path = root / profile / f"{experiment}.yaml"
    if not path.is_file():
        have = sorted(p.relative_to(root).as_posix() for p in root.glob("*/*.yaml"))
        raise ConfigError(f"no params file {path} (available: {', '.join(have) or 'none'})")
    return path
