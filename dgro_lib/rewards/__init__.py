"""Rule-based rewards: DGRO Eq. 12 schemes (Table 4), Logic-RL's K&K reward, the K&K verifier, and the math reward.

See :mod:`dgro_lib.rewards.schemes`, :mod:`dgro_lib.rewards.kk` and :mod:`dgro_lib.rewards.math`.
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
from .math import (
    MathRewardFunc,
    check_math_format,
    extract_boxed,
    extract_math_answer,
    math_components,
    math_equivalent,
    math_is_correct,
    math_outcome,
    math_reward,
    math_reward_func,
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
    "MathRewardFunc",
    "check_math_format",
    "extract_boxed",
    "extract_math_answer",
    "math_components",
    "math_equivalent",
    "math_is_correct",
    "math_outcome",
    "math_reward",
    "math_reward_func",
]
