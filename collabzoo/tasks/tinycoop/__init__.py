"""TinyCoop: a two-agent parity game small enough to train on in seconds, for tests and the
first training run."""
