"""One typed, strict experiment config, loaded from ``params/<profile>/<experiment>.yaml``.

* :mod:`.schema` — the dataclasses, every field documented where it is declared;
* :mod:`.checks` — value checks (losses, optimizer, data, model presets) and where a config can run;
* :mod:`.load` — strict loading, cross-field checks, dotted overrides, the sweep.

Loading is strict: an unknown key, a missing required key or a value of the wrong type raises
:class:`ConfigError` naming the file and the dotted key, so a typo in a YAML never silently falls back to a default.
"""

from dgro_lib.config.checks import check_runnable_here, eval_placement, uses_reference_model, vllm_max_model_length
from dgro_lib.config.load import (SWEEP_JOIN, apply_overrides, config_from_dict, config_to_dict, expand_sweep,
                                  find_params, load_config, point_keys, sweep_entries)
from dgro_lib.config.schema import (DISTRIBUTED, KINDS, DataConfig, EvalConfig, ExperimentConfig, LossConfig,
                                    ModelConfig, RewardConfig, TrainConfig)
from dgro_lib.util.typed import ConfigError

__all__ = [
    "ConfigError",
    "ModelConfig",
    "DataConfig",
    "RewardConfig",
    "LossConfig",
    "TrainConfig",
    "EvalConfig",
    "ExperimentConfig",
    "load_config",
    "config_from_dict",
    "config_to_dict",
    "apply_overrides",
    "expand_sweep",
    "find_params",
    "uses_reference_model",
    "vllm_max_model_length",
    "check_runnable_here",
    "eval_placement",
    "SWEEP_JOIN",
    "point_keys",
    "sweep_entries",
    "DISTRIBUTED",
    "KINDS",
]
