"""The RL step on top of TRL: :mod:`.trainer` (``DGROTrainer``, the rollout hook), :mod:`.rollouts` (extra
temperature-T rollouts merged into a batch), :mod:`.divergence` (the non-finite guard) and :mod:`.vllm_server`. It
looks losses up by name in :mod:`dgro_lib.losses` and never reads a config object: :mod:`dgro_lib.runs.training`
builds it from one."""
