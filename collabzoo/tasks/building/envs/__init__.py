"""The building games' ParallelEnvs and their shared prompts."""
