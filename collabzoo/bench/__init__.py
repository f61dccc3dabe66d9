"""Leaderboard runs: a team (models plus a way of collaborating) on the collaboration tasks,
with the paper's columns, written to auditable results files.

    from collabzoo.bench import BenchRun, parse_team, run_bench
    outcome = run_bench(BenchRun("strbuild", parse_team("scripted:oracle")), "results/")
    outcome.summary["IoU"]        # {"mean": 100.0, "ci95": [...], "n": 2}

`episodes_dataset` turns results files into a Hugging Face dataset of prompts and completions
(`collabzoo export`), the warm-start data of `collabzoo.algos.SupervisedTrainer`.

Scripted and OpenAI-compatible teams need no torch; `hf:` teams load it when they are built.
Nothing else in the package imports this subpackage.
"""

from collabzoo.bench.export import ExportError, episodes_dataset, replayed_rewards
from collabzoo.bench.leaderboard import find_results, plot_score_vs_cost, render_markdown
from collabzoo.bench.models import (
    Generation,
    ModelOptions,
    Sampling,
    ScriptedModel,
    TeamError,
    count_pieces,
)
from collabzoo.bench.protocols import PROTOCOLS, make_protocol
from collabzoo.bench.results import read_results
from collabzoo.bench.runner import (
    BenchError,
    BenchRun,
    Interrupted,
    NotApplicable,
    RunFailed,
    RunOutcome,
    run_bench,
)
from collabzoo.bench.teams import PolicyTeam, Team, parse_team

__all__ = [
    "PROTOCOLS",
    "BenchError",
    "BenchRun",
    "ExportError",
    "Generation",
    "Interrupted",
    "ModelOptions",
    "NotApplicable",
    "PolicyTeam",
    "RunFailed",
    "RunOutcome",
    "Sampling",
    "ScriptedModel",
    "Team",
    "TeamError",
    "count_pieces",
    "episodes_dataset",
    "find_results",
    "make_protocol",
    "parse_team",
    "plot_score_vs_cost",
    "read_results",
    "render_markdown",
    "replayed_rewards",
    "run_bench",
]
