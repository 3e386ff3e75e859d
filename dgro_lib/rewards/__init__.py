"""Rule-based rewards: DGRO Eq. 12 schemes (Table 4), Logic-RL's K&K reward, and the K&K verifier.

See :mod:`dgro_lib.rewards.schemes` and :mod:`dgro_lib.rewards.kk`.
"""

from .kk import (
    KKRewardFunc,
    check_format,
    completion_text,
    extract_answer,
    kk_components,
    kk_is_correct,
    kk_outcome,
    kk_reward,
    kk_reward_func,
    parse_ground_truth,
    parse_roles,
)
from .schemes import (
    LOGIC_RL,
    SCHEMES,
    LogicRLScheme,
    Outcome,
    RewardScheme,
    Scheme,
    get_scheme,
    outcome_components,
)

__all__ = [
    "KKRewardFunc",
    "LOGIC_RL",
    "LogicRLScheme",
    "Outcome",
    "RewardScheme",
    "SCHEMES",
    "Scheme",
    "check_format",
    "completion_text",
    "extract_answer",
    "get_scheme",
    "kk_components",
    "kk_is_correct",
    "kk_outcome",
    "kk_reward",
    "kk_reward_func",
    "outcome_components",
    "parse_ground_truth",
    "parse_roles",
]
