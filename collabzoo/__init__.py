"""CollabZoo: multi-agent LLM collaboration tasks as PettingZoo environments.

import collabzoo
env = collabzoo.make("strbuild")            # == collabzoo.pettingzoo_make("strbuild")
observations, infos = env.reset(seed=0)
"""

from collabzoo.envs import make, names, pettingzoo_make

__version__ = "0.3.0"
__all__ = ["__version__", "make", "names", "pettingzoo_make"]
