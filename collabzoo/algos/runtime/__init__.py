"""Runtime plumbing of a training run: device placement, data parallelism, checkpoints, the run
log and the per-model update groups. None of it knows what a learner optimises."""
