"""The collaboration tasks as PettingZoo ParallelEnvs, and the registry that makes them."""

from collabzoo.envs.registry import (
    entries,
    make,
    make_aec,
    names,
    pettingzoo_make,
    register,
    resolve,
)
from collabzoo.envs.text_env import MEMORY_MODES, RENDER_MODES, TextCollabEnv, TurnResult

register(
    "collabzoo/StrBuild-v0",
    "collabzoo.envs.strbuild:StrBuildEnv",
    "Two builders with disjoint palettes draw a word in blocks, no same-texture neighbours (H=4).",
)
register(
    "collabzoo/CoopHumanEval-v0",
    "collabzoo.envs.code:CoopHumanEvalEnv",
    "A helper writer and a main writer solve CoopHumanEval problems; tests run sandboxed (H=2).",
)
register(
    "collabzoo/HumanEval-v0",
    "collabzoo.envs.code:HumanEvalEnv",
    "A helper writer and a main writer solve HumanEval problems; tests run sandboxed (H=2).",
)
register(
    "collabzoo/MBPP-v0",
    "collabzoo.envs.code:MBPPEnv",
    "A helper writer and a main writer solve MBPP problems; tests run sandboxed (H=2).",
)
register(
    "collabzoo/HouseBuild-v0",
    "collabzoo.envs.housebuild:HouseBuildEnv",
    "Two builders raise a 3-D house under per-builder block caps while spiders attack (H=4).",
)
register(
    "collabzoo/TLDR-v0",
    "collabzoo.envs.writing:TLDREnv",
    "A concise and a detailed writer each summarize a Reddit post, unseen by the other (H=1).",
)
register(
    "collabzoo/ArXiv-v0",
    "collabzoo.envs.writing:ArXivEnv",
    "A background writer and a methods writer expand a paper abstract into an introduction (H=1).",
)
register(
    "collabzoo/TinyCoop-v0",
    "collabzoo.envs.tinycoop:TinyCoopEnv",
    "Two agents win a turn iff alpha's first character has the signal's parity and beta's not.",
)

__all__ = [
    "MEMORY_MODES",
    "RENDER_MODES",
    "TextCollabEnv",
    "TurnResult",
    "entries",
    "make",
    "make_aec",
    "names",
    "pettingzoo_make",
    "register",
    "resolve",
]
