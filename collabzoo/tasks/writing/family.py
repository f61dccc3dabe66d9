"""The writing tasks' declaration."""

from __future__ import annotations

from collabzoo.envs.family import Column, Published, TaskColumns, TaskFamily, TaskSpec, poster_rows

MODELS = "2× Qwen3-1.7B"
TEAMS = "collabzoo.tasks.writing.teams"
METRICS = ("length_ratio", "jaccard")

FAMILY = TaskFamily(
    name="writing",
    tasks=(
        TaskSpec(
            id="collabzoo/TLDR-v0",
            entry_point="collabzoo.tasks.writing.envs:TLDREnv",
            description=(
                "A concise and a detailed writer each summarize a Reddit post, unseen by the "
                "other (H=1)."
            ),
            columns=TaskColumns("TLDR", (Column("Score", "score"),), "Score"),
            published=Published(
                poster_rows(
                    ("Score",),
                    "5.0/465/30.3 4.1/387/91.7 4.0/374/94.5 2.3/244/22.9 4.3/238/21.7 "
                    "4.6/234/22.3 1.8/178/93.5 1.9/194/95.4 1.8/181/95.2",
                ),
                MODELS,
                column=0,
            ),
            teams={"naive": f"{TEAMS}:tldr_naive", "heuristic": f"{TEAMS}:tldr_heuristic"},
            offline={"data": "sample"},
            smoke=True,
            demo_metrics=METRICS,
        ),
        TaskSpec(
            id="collabzoo/ArXiv-v0",
            entry_point="collabzoo.tasks.writing.envs:ArXivEnv",
            description=(
                "A background writer and a methods writer expand a paper abstract into an "
                "introduction (H=1)."
            ),
            columns=TaskColumns("arXiv", (Column("Score", "score"),), "Score"),
            published=Published(
                poster_rows(
                    ("Score",),
                    "5.1/472/44.6 4.2/398/91.0 4.3/392/95.3 2.3/246/49.0 3.9/203/57.8 "
                    "4.8/251/54.3 2.0/201/93.1 2.0/196/94.1 1.9/188/95.0",
                ),
                MODELS,
                column=1,
            ),
            teams={"naive": f"{TEAMS}:arxiv_naive", "heuristic": f"{TEAMS}:arxiv_heuristic"},
            offline={"data": "sample"},
            demo_metrics=METRICS,
        ),
    ),
    module_paths={
        "collabzoo.envs.writing": "collabzoo.tasks.writing.envs",
        "collabzoo.rewards.writing": "collabzoo.tasks.writing.rewards",
    },
)
