"""The task families, each a package of its own: envs, prompts, parsing, pure reward functions,
scripted teams, data loading, and a `family.py` declaring what the suite shows of them
(`collabzoo.envs.family`). `collabzoo.envs` registers them; nothing else names a task.

A family's layers, checked by import-linter: `family` over `teams` and the numeric view, over
`envs`, over `rewards`; the rewards never import an env, and nothing in a family imports the
learners, torch, the bench or the CLI.
"""
