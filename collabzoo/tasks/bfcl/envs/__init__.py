"""BFCL's envs: the native parallel task and the multi-turn flat one, their prompts and data."""

from collabzoo.tasks.bfcl.envs.bfcl_env import BFCLEnv, BFCLMultiTurnEnv, BFCLRow

__all__ = ["BFCLEnv", "BFCLMultiTurnEnv", "BFCLRow"]
