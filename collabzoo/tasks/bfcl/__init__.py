"""BFCL v4: the Berkeley Function Calling Leaderboard's parallel function calls split between two
agents (native parallel, H=1), and its multi-turn trajectories flattened into one-turn steps."""
