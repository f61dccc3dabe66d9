"""Adapters between collabzoo and third-party learning libraries and environment suites.

One module per library, imported on demand (`collabzoo.integrations.comlrl`, `.trl`,
`.textarena`, `.torchrl`, `.openenv`, `.verifiers`), so importing collabzoo never imports any
of them; the libraries come with the `interop` extra: pip install "collabzoo[interop]". The
envs, rewards, sandbox and learners never import this package.
"""
