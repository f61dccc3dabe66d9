"""Any collabzoo env as a verifiers environment: each agent a seat with its own model, and the
turns simultaneous, as the env defines them.

verifiers 0.4 (its `verifiers.v1` API) builds an environment from plugins it finds by id: a
Taskset (the rows), an Env (how one row becomes an episode: its seats and their exchange) and a
Harness (the program that plays a seat). This module is all three, under the plugin id
`collabzoo-verifiers`, for any collabzoo env:

- rows: the env's tasks of one split, each reset with options={"task": i, "split": split};
- seats: verifiers declares an env's seats as fields of its config, so they cannot follow each
  env's agent names; every collabzoo env has two agents, played by the seats `first` and
  `second` (`env.possible_agents[0]` and `[1]`), each with its own model (a model id, or a LoRA
  adapter served under its own name), client and sampling;
- turns: each turn every live agent answers its observation with one chat completion, all at
  once; then the env steps on the answers (its PettingZoo API) and the next observations open
  the next turn, until the episode ends. A seat's model sees exactly its observation each turn
  (the env's `memory` option decides how much of the episode that holds), not a chat transcript
  that would repeat it;
- score: every seat's trace gets the env's own reward as `total_reward` (the team reward summed
  over the turns) and, as metrics, `component/<name>` (the reward components summed over the
  turns, which add up to it), `metric/<name>` and `final_reward` (the last turn's).

    env = load_environment("coophumaneval", sandbox="docker", models={"aux": "a", "main": "b"})
    # verifiers' own evaluation, as vf-eval runs it (docs/guides/serving.md has the whole example)
    episodes = asyncio.run(run_eval(EvalConfig(env=env.config, client=..., push=False)))

verifiers imports a plugin by its id as a top-level module: the package `collabzoo_verifiers`,
installed with collabzoo, re-exports this module under that name.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any, cast

import collabzoo
from collabzoo.envs.registry import resolve

try:
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.dialects.chat import message_to_wire
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "collabzoo.integrations.verifiers needs verifiers 0.4: "
        'pip install "collabzoo[interop]" (or pip install "verifiers==0.4.0")'
    ) from error

PLUGIN_ID = "collabzoo-verifiers"
"""The id verifiers finds this module's taskset, env and harness by."""
SEATS = ("first", "second")
"""The seats of the env's agents, in `possible_agents` order."""
REWARD = "total_reward"


class CollabZooTasksetConfig(vf.TasksetConfig):
    """Which collabzoo env, and which of its tasks (`--env.taskset.*`)."""

    env_id: str = ""
    """The collabzoo env: a short name ("coophumaneval") or a versioned id (required)."""
    split: str = "train"
    num_examples: int | None = Field(None, ge=1)
    """The first this many tasks of the split (None: all)."""
    seed: int = 0
    """The seed every episode resets with (the env's own randomness; the models sample theirs)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of `collabzoo.make`; JSON values, as the run saves its config."""
    sandbox: str | None = None
    """Where a code env runs its tests: a `collabzoo.sandbox` kind ("docker", "process", ...),
    one pool for the whole run; None: the env's default sandbox."""


class CollabZooData(vf.TaskData):
    """One task of the env: the reset that starts its episodes."""

    split: str
    task: int
    """The task's index in its split."""
    task_id: str
    seed: int


class CollabZooTask(vf.Task[CollabZooData, vf.State, vf.TaskConfig]):
    """A collabzoo task. It has no reward of its own: the env's steps score the episode."""


def _make(config: CollabZooTasksetConfig, sandbox: Any = None) -> Any:
    kwargs = dict(config.env_kwargs)
    if sandbox is not None:
        kwargs["sandbox"] = sandbox
    return collabzoo.make(config.env_id, **kwargs)


class CollabZooTaskset(vf.Taskset[CollabZooTask, CollabZooTasksetConfig]):
    """The env's tasks of one split; `env` is the env the episodes copy."""

    def __init__(self, config: CollabZooTasksetConfig) -> None:
        super().__init__(config)
        if not config.env_id:
            raise ValueError(
                "name the collabzoo env: env_id (--env.taskset.env-id), one `collabzoo list` names"
            )
        entry = resolve(config.env_id)  # an unknown name raises, listing the known ones
        if config.sandbox is not None:
            from collabzoo.sandbox import KINDS

            if config.sandbox not in KINDS:
                raise ValueError(f"sandbox must be one of {KINDS} or None, got {config.sandbox!r}")
            if "sandbox" in config.env_kwargs:
                raise ValueError("give the sandbox once: sandbox=<kind>, not env_kwargs['sandbox']")
        self.env = _make(config)
        if config.sandbox is not None and not hasattr(self.env, "sandbox"):
            raise ValueError(f"{entry.id} runs no code: it takes no sandbox")
        if not callable(getattr(self.env, "items", None)):
            raise TypeError(f"{entry.id} does not list its tasks (items(split)): no rows to load")
        if len(self.env.possible_agents) != len(SEATS):
            raise ValueError(
                f"{entry.id} has agents {self.env.possible_agents}; this adapter seats "
                f"{len(SEATS)} ({', '.join(SEATS)})"
            )
        self.short_name = entry.short_name
        self.count = len(self.env.items(config.split))  # an unknown split raises here
        if config.num_examples is not None:
            self.count = min(self.count, config.num_examples)

    def load(self) -> Iterator[CollabZooTask]:
        split, seed = self.config.split, self.config.seed
        for index in range(self.count):
            probe = copy.deepcopy(self.env)
            observations, infos = probe.reset(seed=seed, options={"task": index, "split": split})
            task_id = str(infos[probe.possible_agents[0]].get("task_id", index))
            joint = "\n\n".join(f"##### {a} #####\n{observations[a]}" for a in probe.agents)
            data = CollabZooData(
                id=task_id,
                name=f"{self.short_name}/{task_id}",
                prompt=joint,
                split=split,
                task=index,
                task_id=task_id,
                seed=seed,
            )
            yield CollabZooTask(data, self.config.task)


class CollabZooHarnessConfig(vf.HarnessConfig):
    """No knobs: a seat's turn is one chat completion."""


class CollabZooHarness(vf.Harness[CollabZooHarnessConfig]):
    """One chat completion per turn, made in process through the run's model endpoint (the
    interception, which records it on the trace): the answer is the whole completion."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        import openai

        system, prompt = self.resolve_prompt(data)
        messages: list[Any] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(m) for m in prompt or []]
        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")

    async def resume(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        messages: vf.Messages,
        tool_interception_url: str | None = None,
    ) -> vf.ProgramResult:
        """A later turn: the model sees the seat's new observation alone, which holds what the
        env lets the agent remember (verifiers' default would resend the whole transcript)."""
        turn = data.model_copy(update={"prompt": list(messages)})
        return await self.launch(ctx, trace, runtime, endpoint, secret, mcp_urls, turn)


def _local_seat() -> vf.AgentConfig:
    # The harness runs in this process; the runtime is only its scratch folder.
    return vf.AgentConfig(runtime=vf.SubprocessConfig())


class CollabZooEnvConfig(vf.EnvConfig):
    """The seats (`--env.first.*`, `--env.second.*`) and the run's knobs."""

    first: vf.AgentConfig = _local_seat()
    """The env's first agent (`possible_agents[0]`)."""
    second: vf.AgentConfig = _local_seat()
    """The env's second agent (`possible_agents[1]`)."""
    max_concurrent_agents: int | None = Field(None, ge=1)
    """Both seats answer a turn at once (None: no limit), as the env's turns are simultaneous."""


def _answer(segment: vf.Segment) -> str:
    """The seat's completion, whole (`Segment.last_reply` strips it)."""
    for message in reversed(segment.messages):
        if isinstance(message, vf.AssistantMessage):
            content = message.content
            if isinstance(content, str) or content is None:
                return content or ""
            return "".join(getattr(part, "text", "") for part in content)
    return ""


class _Score:
    """The episode's score as it is played: the team reward of each turn, summed, with its
    components; the last turn's metrics."""

    def __init__(self) -> None:
        self.total = 0.0
        self.final = 0.0
        self.components: dict[str, float] = {}
        self.metrics: dict[str, float] = {}

    def add(self, rewards: Mapping[str, float], infos: Mapping[str, Mapping[str, Any]]) -> None:
        values = [float(r) for r in rewards.values()]
        self.final = sum(values) / len(values)  # collabzoo agents share the team reward
        self.total += self.final
        info = next(iter(infos.values()), {})
        for name, value in info.get("reward_components", {}).items():
            self.components[name] = self.components.get(name, 0.0) + float(value)
        self.metrics = {
            name: float(value)
            for name, value in info.get("metrics", {}).items()
            if isinstance(value, (int, float))
        }

    def record(self, trace: vf.Trace) -> None:
        trace.record_reward(REWARD, self.total)
        trace.record_metrics({f"component/{k}": v for k, v in self.components.items()})
        trace.record_metrics({f"metric/{k}": v for k, v in self.metrics.items()})
        trace.record_metric("final_reward", self.final)


class CollabZooEnv(vf.Env[CollabZooEnvConfig]):
    """A collabzoo env's episodes, played by the seats; `seats` maps each agent to its seat."""

    taskset: CollabZooTaskset

    def __init__(self, config: CollabZooEnvConfig) -> None:
        super().__init__(config)
        if not isinstance(self.taskset, CollabZooTaskset):
            raise TypeError(
                f"CollabZooEnv plays collabzoo tasks: set the taskset id to {PLUGIN_ID!r}, "
                f"got {config.taskset.id!r}"
            )
        self.seats = dict(zip(self.taskset.env.possible_agents, SEATS, strict=True))
        self._template = self.taskset.env
        self._sandbox: Any = None

    async def start(self) -> None:
        """One sandbox pool for the run when the taskset names a kind (closed by `stop`)."""
        config = self.taskset.config
        if config.sandbox is not None:
            from collabzoo.sandbox import get_sandbox

            self._sandbox = await asyncio.to_thread(get_sandbox, config.sandbox)
            self._template = await asyncio.to_thread(_make, config, self._sandbox)

    async def stop(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        self._template = self.taskset.env
        if sandbox is not None:
            await asyncio.to_thread(sandbox.close)

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data = cast(CollabZooData, task.data)
        env = copy.deepcopy(self._template)
        options = {"task": data.task, "split": data.split}
        observations, _ = env.reset(seed=data.seed, options=options)
        score = _Score()
        live: dict[str, vf.Interaction] = {}
        async with contextlib.AsyncExitStack() as stack:
            for agent in env.agents:
                seat = getattr(agents, self.seats[agent])
                own = task.with_data(prompt=observations[agent], name=f"{data.name}/{agent}")
                live[agent] = await stack.enter_async_context(seat.interaction(own))
                live[agent].trace.info["collabzoo_agent"] = agent
            turn = 0
            while env.agents:
                acting = list(env.agents)
                # Simultaneous: every agent answers this turn's observation before the env steps.
                segments = await asyncio.gather(
                    *(
                        live[a].turn() if turn == 0 else live[a].turn(observations[a])
                        for a in acting
                    )
                )
                for agent, segment in zip(acting, segments, strict=True):
                    if segment.terminated:
                        trace = live[agent].trace
                        why = trace.last_error.message if trace.last_error else trace.stop_condition
                        raise RuntimeError(f"{agent} gave no answer at turn {turn}: {why}")
                actions = {a: _answer(s) for a, s in zip(acting, segments, strict=True)}
                observations, rewards, _, _, infos = await asyncio.to_thread(env.step, actions)
                score.add(rewards, infos)
                turn += 1
            for interaction in live.values():  # before closing, so the rollout logs show it
                score.record(interaction.trace)


def load_environment(
    env_id: str,
    *,
    split: str = "train",
    num_examples: int | None = None,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    sandbox: str | None = None,
    models: Mapping[str, str] | None = None,
) -> CollabZooEnv:
    """The verifiers environment of a collabzoo env (`collabzoo.make(env_id, **env_kwargs)`).

    `models` maps an agent name to the model its seat calls (e.g. {"aux": "model-a"}); a seat
    without one uses the run's model. `sandbox` picks where a code env runs its tests (see
    `CollabZooTasksetConfig`). Other seat settings (client, sampling, limits): build a
    `CollabZooEnvConfig` and call `verifiers.v1.load_environment` on it.
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a collabzoo env name (str), got {type(env_id).__name__}")
    entry = resolve(env_id)
    if env_kwargs is not None and not isinstance(env_kwargs, Mapping):
        raise TypeError(f"env_kwargs must be a mapping, got {type(env_kwargs).__name__}")
    kwargs = dict(env_kwargs or {})
    try:
        json.dumps(kwargs)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"env_kwargs must hold JSON values, as verifiers saves the run's config ({error}); "
            "for a code env's sandbox pass sandbox=<kind> ('docker', 'process', ...)"
        ) from None
    for name, value in (("num_examples", num_examples), ("seed", seed)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if num_examples is not None and num_examples < 1:
        raise ValueError(f"num_examples must be at least 1, got {num_examples}")
    if not isinstance(split, str):
        raise TypeError(f"split must be a str, got {split!r}")
    seats: dict[str, dict[str, str]] = {}
    if models is not None:
        if not isinstance(models, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in models.items()
        ):
            raise TypeError(f"models must map agent names to model ids (str), got {models!r}")
        agents = list(collabzoo.make(env_id, **kwargs).possible_agents)
        unknown = sorted(set(models) - set(agents))
        if unknown:
            raise ValueError(f"models names no agent of {entry.id} {unknown}; its agents: {agents}")
        seats = {SEATS[agents.index(a)]: {"model": m} for a, m in models.items()}
    taskset = {
        "id": PLUGIN_ID,
        "env_id": env_id,
        "split": split,
        "num_examples": num_examples,
        "seed": seed,
        "env_kwargs": kwargs,
        "sandbox": sandbox,
    }
    config = CollabZooEnvConfig.model_validate({"taskset": taskset, **seats})
    return cast(CollabZooEnv, vf.load_environment(config))  # found by the taskset's plugin id


__all__ = [
    "PLUGIN_ID",
    "SEATS",
    "CollabZooData",
    "CollabZooEnv",
    "CollabZooEnvConfig",
    "CollabZooHarness",
    "CollabZooHarnessConfig",
    "CollabZooTask",
    "CollabZooTaskset",
    "CollabZooTasksetConfig",
    "load_environment",
]
