"""verifiers' plugin `collabzoo-verifiers`: verifiers imports a plugin id as the top-level module
of that name, so this package re-exports `collabzoo.integrations.verifiers`, where the taskset,
env and harness of any collabzoo env live (`vf-eval collabzoo-verifiers ...` then works in a
fresh process)."""

from collabzoo.integrations.verifiers import *  # noqa: F403
from collabzoo.integrations.verifiers import __all__  # noqa: F401
