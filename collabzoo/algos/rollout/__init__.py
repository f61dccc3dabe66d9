"""Rollouts: the rollout tree every learner grows, and the optional backends that grow it
faster (vLLM generation, Ray environment steps), each imported only where a config chooses it."""
