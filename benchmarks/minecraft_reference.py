"""The reference's two games (OpenMLRL/LLM_Collab_Minecraft's BridgeBuild and ResourceGathering
files), loaded from a folder and driven as its trainers drive them.

benchmarks/game_speed.py times these turns against collabzoo's; the conformance scripts
(benchmarks/bridgebuild_conformance.py, benchmarks/resourcegathering_conformance.py) record
episodes played through them. The files are not in the reference repository's git history (they
were read from a public code index), so `--reference` names a folder holding them at their paths.
The scripts run as `python benchmarks/x.py` and import this module as a sibling.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

BRIDGE_FILE = "bridge_build/utils/bridge_builder.py"
GATHER_FILE = "resource_gathering/utils/resource_gathering.py"
COTI_FILE = "bridge_build/coti/adapter.py"
COTI_COMMIT = "57649ab74374dd34ffcc6c96b65c98fbfd14c1c4"
COTI_PACKAGE = "LLM_Collab_Minecraft.bridge_build.utils.bridge_builder"
"""The module path the CoTI adapter imports the simulator by (its repository as a package)."""

COTI_SHAPING = {
    "n_adjacent_penalty_scale": 1.5,
    "cc_merge_bonus_scale": 0.5,
    "y_connected_bonus_scale": 1.0,
    "terminal_clean_bonus_scale": 0.0,
    "move_progress_bonus_total": 2.5,
    "late_quality_turn3_weight": 0.5,
    "late_quality_turn4_weight": 1.0,
    "late_quality_clean_scale": 0.3,
    "late_quality_compact_scale": 0.35,
    "late_quality_ready_scale": 0.2,
}
"""`reward_shaping` of the CoTI config (configs/coti/bcmaac_baseline_data_full.yaml@36ab05e)."""

BRIDGE_BLOCKS = [["oak_planks"], ["oak_planks"]]
"""The blocks each agent may place on the CoMLRL path."""

GATHER_CONFIG = {
    "path_slots": 4,
    "comm_limit": 1,
    "progress_reward_scale": 8.0,
    "terminal_bonus": 7.0,
    "move_cost_scale": 0.0,
    "comm_cost_scale": 0.0,
    "move_to_zone_bonus_scale": 0.05,
    "useful_comm_bonus_scale": 0.1,
    "first_enter_zone_bonus_scale": 0.15,
}
"""The reference config (configs/comlrl/resource_gathering_maac_config.yaml) as its trainer
builds the reward config."""


def load_reference(folder: Path, relative: str, name: str) -> ModuleType:
    """The reference's file `relative` under `folder`, imported as module `name`."""
    path = folder / relative
    if not path.is_file():
        raise SystemExit(f"--reference: no {relative} under {folder}")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def bridge_turn(ref: ModuleType, task: Any, state: Any, answers: list[str], max_probe: int) -> Any:
    """The reference's BridgeBuild turn on the CoMLRL path (view 3, 40 commands, oak planks)."""
    return ref.apply_turn(
        task=task,
        state=state,
        agent_outputs=answers,
        allowed_blocks_per_agent=BRIDGE_BLOCKS,
        max_commands_total=40,
        view=3,
        max_probe=max_probe,
    )


class CotiShaper:
    """The reference CoTI adapter's reward shaping (`BridgeBuildAdapter._adjust_reward_metrics`
    of bridge_build/coti/adapter.py), applied to `apply_turn`'s metrics as its `transition` does,
    with the config's `reward_shaping` and the movement norm of the episode's start.

    The adapter imports the simulator as a package of its repository and imports torch; the
    simulator loaded from `--reference` stands in for that package (names the adapter imports
    but the pinned simulator lacks are left as None: the shaping never calls them)."""

    def __init__(self, folder: Path, bridge: ModuleType, tasks: Sequence[Any]) -> None:
        package = ModuleType(COTI_PACKAGE)
        package.__dict__.update(vars(bridge))
        package.__getattr__ = lambda name: None  # type: ignore[attr-defined]
        parts = COTI_PACKAGE.split(".")
        for depth in range(1, len(parts)):
            sys.modules.setdefault(".".join(parts[:depth]), ModuleType(".".join(parts[:depth])))
        sys.modules[COTI_PACKAGE] = package
        module = load_reference(folder, COTI_FILE, "reference_coti_adapter")
        self.adapter = module.BridgeBuildAdapter(
            prompt_ctx={"max_probe": 3, "view": 3, "max_commands_total": 40},
            num_agents=2,
            task_ids=[t.task_id for t in tasks],
            task_specs=list(tasks),
            reward_config=COTI_SHAPING,
        )

    def norm(self, task: Any, state: Any) -> float:
        """The adapter's movement norm for an episode starting at `state`."""
        return float(max(1.0, self.adapter._movement_distance_total(task=task, state=state)))

    def shape(self, task: Any, before: Any, result: Any, norm: float) -> dict[str, Any]:
        """The CoTI metrics of a turn `apply_turn` played from `before`."""
        return self.adapter._adjust_reward_metrics(
            metrics=dict(result.metrics),
            task=task,
            prev_state=before,
            next_state=result.state,
            move_distance_norm=norm,
        )


def gather_payload(
    ref: ModuleType, task: Any, *, config: str = "reference", extraction_limit: int = 2
) -> dict[str, Any]:
    """The payload the reference's ResourceGathering trainer carries from turn to turn, at the
    start of an episode (2 agents, 4 turns, view 2, targets within 2, paths of 4 moves) with the
    reference config or, `config="wrapper"`, none (the wrapper's defaults)."""
    return ref.build_payload(
        task=task,
        state_before_turn=ref.make_initial_state(task, num_agents=2, max_turns=4),
        num_agents=2,
        view=2,
        extraction_limit=extraction_limit,
        extraction_range=2,
        max_path_len=4,
        system_prompt="",
        user_template_single="",
        user_template_agent1="",
        user_template_agent2="",
        reward_config=GATHER_CONFIG if config == "reference" else {},
    )


def dressed(obj: Any, rng: random.Random) -> str:
    """An action object written out as an LLM might (seeded): plain or indented JSON, fenced,
    after a fenced sketch, inside prose, a Python literal, cut off, after a smaller object, with
    a trailing comma, or no object at all."""
    text = json.dumps(obj)
    kind = rng.randrange(14)
    if kind in (0, 1, 2, 3):
        return text
    if kind == 4:
        return json.dumps(obj, indent=2)
    if kind == 5:
        return f"```json\n{text}\n```"
    if kind == 6:
        return f'Sketch:\n```\n{{"draft": true}}\n```\nFinal:\n```json\n{text}\n```'
    if kind == 7:
        return f"Here is my move: {text} -- done."
    if kind == 8:
        return repr(obj)
    if kind == 9:
        return text[: max(1, len(text) - rng.randint(1, 15))]
    if kind == 10:
        return f'{{"comm": {{}}}} then {text}'
    if kind == 11:
        return text[:-1] + ", }" if text.endswith("}") else text
    if kind == 12:
        return rng.choice(["", "I pass this turn.", "{", "}{", "[1, 2]", "null"])
    return f'{text}\n{{"path": []}}'


def team_answers(
    env: Any,
    observations: dict[str, str],
    policy: Callable[[str], str],
    spoil: Callable[[str], str] | None,
    turns: list[dict[str, Any]],
) -> list[str]:
    """A conformance episode's answers this turn: the scripted team's to collabzoo's prompts,
    each passed through `spoil` if given; once collabzoo's episode is over (the reference plays
    one turn more), the last turn's answers again."""
    if not env.agents:
        return turns[-1]["answers"]
    answers = [policy(observations[a]) for a in env.possible_agents]
    return [spoil(a) for a in answers] if spoil is not None else answers


def write_conformance(
    output: Path,
    document: dict[str, Any],
    kept: list[dict[str, Any]],
    added: list[dict[str, Any]],
    script: str,
    groups: Sequence[tuple[str, int]],
    how: str,
) -> None:
    """Write a conformance set: the episodes kept, then those added (each naming its script and
    seed in `made_by`), its provenance saying that `script` (a file of benchmarks/) added each
    group of episodes (a description and its seed), and `how`."""
    document["episodes"] = kept + added
    made = "; ".join(f"{what} (seed {seed})" for what, seed in groups)
    document["provenance"]["scripted"] = (
        f"episodes with `made_by`: benchmarks/{script}: {made}; {how}. Episodes without "
        "`made_by` were made outside this repository, as `how` says"
    )
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    output.write_text(text + "\n", encoding="utf-8")
    print(f"{len(kept)} episodes kept, {len(added)} added: {output}")
