"""Learners written only against the PettingZoo API, so they train on any ParallelEnv: with LLM
policies on text observations and actions, with `MLPPolicy` on numeric ones (classic MARL
environments). The Monte-Carlo learners MA-REINFORCE and MAGRPO, and the actor-critic learners
IAC, IPPO and the centralized critic (CoLLM-CC); and the supervised warm start that gives them a
policy which already speaks a task (`SupervisedTrainer`, on datasets `collabzoo export` writes).

Nothing here may import collabzoo.envs, collabzoo.rewards or collabzoo.sandbox: a learner sees a
task only as a ParallelEnv, which is what lets it train on third-party environments too.
Needs the training extra: pip install "collabzoo[train]".
"""

from collabzoo.algos.learners.atgrpo import ATGRPOConfig, ATGRPOTrainer
from collabzoo.algos.learners.central_critic import (
    CentralCriticConfig,
    CentralCriticTrainer,
    CoLLMCCConfig,
    CoLLMCCTrainer,
    MAACConfig,
    MAACTrainer,
)
from collabzoo.algos.learners.iac import IACConfig, IACTrainer
from collabzoo.algos.learners.ippo import IPPOConfig, IPPOTrainer
from collabzoo.algos.learners.joint_actor import (
    JointACConfig,
    JointActorConfig,
    JointActorTrainer,
    JointACTrainer,
)
from collabzoo.algos.learners.madpo import (
    MADPOConfig,
    MADPOIterConfig,
    MADPOIterTrainer,
    MADPOTrainer,
)
from collabzoo.algos.learners.magrpo import MAGRPOConfig, MAGRPOTrainer
from collabzoo.algos.learners.maremax import MAReMaxConfig, MAReMaxTrainer
from collabzoo.algos.learners.marlhf import (
    MARLHFConfig,
    MARLHFIterConfig,
    MARLHFIterTrainer,
    MARLHFTrainer,
)
from collabzoo.algos.learners.marloo import MARLOOConfig, MARLOOTrainer
from collabzoo.algos.learners.reinforce import MAREINFORCEConfig, MAREINFORCETrainer
from collabzoo.algos.learners.supervised import SupervisedConfig, SupervisedTrainer
from collabzoo.algos.policies.llm import LLMPolicy
from collabzoo.algos.policies.mlp import MLPPolicy, mlp_team
from collabzoo.algos.policies.model_loading import (
    load_causal_lm,
    load_saved_team,
    lora_team,
    small_causal_lm,
    tiny_causal_lm,
)
from collabzoo.algos.policies.sampling import Sampling

LEARNERS = {
    "magrpo": (MAGRPOConfig, MAGRPOTrainer),
    "mareinforce": (MAREINFORCEConfig, MAREINFORCETrainer),
    "iac": (IACConfig, IACTrainer),
    "ippo": (IPPOConfig, IPPOTrainer),
    "cc": (CentralCriticConfig, CentralCriticTrainer),
    "marloo": (MARLOOConfig, MARLOOTrainer),
    "maremax": (MAReMaxConfig, MAReMaxTrainer),
    "joint": (JointActorConfig, JointActorTrainer),
    "joint-ac": (JointACConfig, JointACTrainer),
    "atgrpo": (ATGRPOConfig, ATGRPOTrainer),
    "madpo": (MADPOConfig, MADPOTrainer),
    "madpo-iter": (MADPOIterConfig, MADPOIterTrainer),
    "marlhf": (MARLHFConfig, MARLHFTrainer),
    "marlhf-iter": (MARLHFIterConfig, MARLHFIterTrainer),
}
"""Learner name -> (config class, trainer class), as `collabzoo train ALGO` knows them."""

LEARNER_ALIASES = {"maac": "cc"}
"""Other names `collabzoo train` accepts -> the learner they run: CoMLRL's MAAC is the
centralized critic, with nothing to set apart (unlike MARLOO and MAReMax, whose defaults
differ from MA-REINFORCE's), so it is a second name, not a second learner."""

__all__ = [
    "LEARNERS",
    "LEARNER_ALIASES",
    "ATGRPOConfig",
    "ATGRPOTrainer",
    "CentralCriticConfig",
    "CentralCriticTrainer",
    "CoLLMCCConfig",
    "CoLLMCCTrainer",
    "IACConfig",
    "IACTrainer",
    "IPPOConfig",
    "IPPOTrainer",
    "JointACConfig",
    "JointACTrainer",
    "JointActorConfig",
    "JointActorTrainer",
    "LLMPolicy",
    "MAACConfig",
    "MAACTrainer",
    "MADPOConfig",
    "MADPOIterConfig",
    "MADPOIterTrainer",
    "MADPOTrainer",
    "MAGRPOConfig",
    "MAGRPOTrainer",
    "MAREINFORCEConfig",
    "MAREINFORCETrainer",
    "MARLHFConfig",
    "MARLHFIterConfig",
    "MARLHFIterTrainer",
    "MARLHFTrainer",
    "MARLOOConfig",
    "MARLOOTrainer",
    "MAReMaxConfig",
    "MAReMaxTrainer",
    "MLPPolicy",
    "Sampling",
    "SupervisedConfig",
    "SupervisedTrainer",
    "load_causal_lm",
    "load_saved_team",
    "lora_team",
    "mlp_team",
    "small_causal_lm",
    "tiny_causal_lm",
]
