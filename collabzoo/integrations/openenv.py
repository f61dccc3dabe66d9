"""Any collabzoo env over OpenEnv's contract, and a PettingZoo env backed by such a server.

OpenEnv (`openenv-core`) serves an environment as `reset` / `step` / `state` over a WebSocket
session per client, with typed (pydantic) actions and observations. Its contract is single-
actor, so the server here takes the *joint* action: one whole completion per live agent, by
role, exactly what `ParallelEnv.step` takes. The observation carries everything a
`ParallelEnv` returns (each agent's prompt, rewards, terminations, truncations, infos) plus the
team reward as OpenEnv's `reward`, the reward components, the metrics and `state()`.

    collabzoo serve coophumaneval --port 8000            # or: app = make_app("coophumaneval")
    env = remote_env("http://127.0.0.1:8000")             # a PettingZoo ParallelEnv

Every WebSocket session gets its own deep copy of one env built at start-up, so sessions are
isolated while the task data and the code sandbox's container pool are loaded once and shared.
`copy.deepcopy` of a `RemoteEnv` (how the learners branch a rollout tree) opens a new session
that the server fills with a copy of the source session's env: the copy starts exactly where
the original is, generator state included, without replaying a step.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copy
import json
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, ClassVar

import numpy as np
from gymnasium import error as gymnasium_error
from gymnasium.spaces import Space, Text
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
from openenv.core.generic_client import GenericEnvClient
from pettingzoo import ParallelEnv
from pydantic import Field

from collabzoo.envs import make, resolve
from collabzoo.envs.text_space import LLMText

DEFAULT_MAX_SESSIONS = 256
"""Sessions a server holds at once: a rollout tree keeps one per live branch (prompts x K)."""
DEFAULT_SESSION_TIMEOUT_S = 900.0
"""Idle seconds after which the server drops a session whose client vanished."""
IDLE_SESSIONS_KEPT = 64
"""Open sessions a client process keeps per server once their envs are dropped, to hold the
next copies: a new session costs a connection and a server-side env, a kept one one message."""
_ERROR_TYPES: dict[str, type[Exception]] = {
    error.__name__: error
    for error in (ValueError, TypeError, KeyError, RuntimeError, IndexError, gymnasium_error.Error)
}
"""The env's input errors, which the server sends back by name and the client raises again."""


class JointAction(Action):
    """One whole completion per live agent, by role (what `ParallelEnv.step` takes)."""

    actions: dict[str, Any] = Field(..., description="agent -> its completion (a str)")


class TeamObservation(Observation):
    """What reset / step returned for the whole team; OpenEnv's `reward` is the team reward."""

    observations: dict[str, Any] = Field(default_factory=dict, description="each agent's prompt")
    agents: list[str] = Field(default_factory=list, description="agents live after this call")
    rewards: dict[str, float] = Field(default_factory=dict)
    terminations: dict[str, bool] = Field(default_factory=dict)
    truncations: dict[str, bool] = Field(default_factory=dict)
    infos: dict[str, dict[str, Any]] = Field(default_factory=dict)
    reward_components: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    state: str | None = Field(default=None, description="the env's state(): the joint view")
    session: str = Field(default="", description="this session's token, for forking it")


class TeamState(State):
    """The served env's identity and spaces (available before the first reset)."""

    env_id: str = ""
    possible_agents: list[str] = Field(default_factory=list)
    agents: list[str] = Field(default_factory=list)
    observation_max_chars: dict[str, int] = Field(default_factory=dict)
    action_max_chars: dict[str, int] = Field(default_factory=dict)
    session: str = ""


def _plain(value: Any) -> Any:
    """`value` as JSON can carry it: numpy scalars and arrays as numbers and lists, tuples as
    lists, anything else unknown as its text (infos may hold parsed answers of any shape)."""

    def default(item: Any) -> Any:
        if isinstance(item, np.generic):
            return item.item()
        if isinstance(item, np.ndarray):
            return item.tolist()
        if isinstance(item, (set, frozenset)):
            return sorted(item, key=repr)
        return repr(item)

    return json.loads(json.dumps(value, default=default))


def _text_bound(space: Space, what: str, agent: str) -> int:
    if not isinstance(space, Text):
        raise TypeError(
            f"collabzoo serve carries text observations and actions; the {what} space of "
            f"{agent!r} is {space!r}"
        )
    return int(space.max_length)


@contextlib.contextmanager
def _as_env_error() -> Iterator[None]:
    """The env's input errors travel to the client with their type named, so the client
    raises the same error the env raises in-process."""
    try:
        yield
    except tuple(_ERROR_TYPES.values()) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise RuntimeError(f"{type(error).__name__}: {message}") from error


class _Sessions:
    """The live envs of one server by session token, so a new session can start as a copy."""

    def __init__(self) -> None:
        self._by_token: weakref.WeakValueDictionary[str, CollabZooEnvironment] = (
            weakref.WeakValueDictionary()
        )
        self._lock = threading.Lock()

    def add(self, session: CollabZooEnvironment) -> None:
        with self._lock:
            self._by_token[session.token] = session

    def get(self, token: str) -> CollabZooEnvironment:
        with self._lock:
            session = self._by_token.get(token)
        if session is None:
            raise ValueError(
                f"no live session {token!r} on this server to copy (it was closed, timed out, or "
                "lives on another server process)"
            )
        return session

    def remove(self, token: str) -> None:
        with self._lock:
            self._by_token.pop(token, None)


class CollabZooEnvironment(Environment[JointAction, TeamObservation, TeamState]):
    """One OpenEnv session: a private copy of a collabzoo `ParallelEnv`."""

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self, env: ParallelEnv, env_id: str, sessions: _Sessions) -> None:
        super().__init__()
        self.env = env
        self.env_id = env_id
        self.token = uuid.uuid4().hex
        self._sessions = sessions
        self._lock = threading.Lock()  # held while stepping, and while another session copies
        self._episode_id: str | None = None
        self._steps = 0
        self._last: TeamObservation | None = None
        sessions.add(self)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
        copy_of: str | None = None,
        **kwargs: Any,
    ) -> TeamObservation:
        """A new episode, or (`copy_of`: another session's token) that session's env as it is
        now, mid-episode included."""
        with self._lock, _as_env_error():
            if kwargs:
                raise TypeError(
                    f"reset takes seed, options and copy_of; unknown: {', '.join(sorted(kwargs))}"
                )
            if copy_of is not None:
                source = self._sessions.get(copy_of)
                with source._lock:
                    if source._last is None:
                        raise ValueError(f"session {copy_of!r} has not been reset: nothing to copy")
                    self.env = copy.deepcopy(source.env)
                    self._episode_id, self._steps = source._episode_id, source._steps
                    last = source._last
                self._last = last.model_copy(update={"session": self.token})
                return self._last
            observations, infos = self.env.reset(seed=seed, options=options)
            self._episode_id = episode_id or uuid.uuid4().hex
            self._steps = 0
            self._last = self._observation(observations, {}, {}, {}, infos)
            return self._last

    def step(
        self, action: JointAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TeamObservation:
        with self._lock, _as_env_error():
            stepped = self.env.step(action.actions)
            self._steps += 1
            self._last = self._observation(*stepped)
            return self._last

    @property
    def state(self) -> TeamState:
        possible = list(self.env.possible_agents)
        return TeamState(
            episode_id=self._episode_id,
            step_count=self._steps,
            env_id=self.env_id,
            possible_agents=possible,
            agents=list(self.env.agents),
            observation_max_chars={
                a: _text_bound(self.env.observation_space(a), "observation", a) for a in possible
            },
            action_max_chars={
                a: _text_bound(self.env.action_space(a), "action", a) for a in possible
            },
            session=self.token,
        )

    def close(self) -> None:
        """Forget this session; the env copy's shared parts (data, sandbox) stay with the
        server, which closes them once at shutdown."""
        self._sessions.remove(self.token)

    def _observation(
        self,
        observations: Mapping[str, Any],
        rewards: Mapping[str, float],
        terminations: Mapping[str, bool],
        truncations: Mapping[str, bool],
        infos: Mapping[str, Mapping[str, Any]],
    ) -> TeamObservation:
        agents = list(self.env.agents)
        acted = list(rewards)
        team = sum(float(rewards[a]) for a in acted) / len(acted) if acted else None
        first = next(iter(infos.values()), {})
        try:
            state = self.env.state() if agents or acted else None
        except (NotImplementedError, AttributeError, RuntimeError):
            state = None
        return TeamObservation(
            observations=_plain(dict(observations)),
            agents=agents,
            rewards={a: float(r) for a, r in rewards.items()},
            terminations={a: bool(t) for a, t in terminations.items()},
            truncations={a: bool(t) for a, t in truncations.items()},
            infos=_plain({a: dict(i) for a, i in infos.items()}),
            reward_components=_plain(dict(first.get("reward_components", {}))),
            metrics=_plain(dict(first.get("metrics", {}))),
            state=state if isinstance(state, str) else None,
            session=self.token,
            reward=team,
            done=bool(acted) and not agents,
        )


def make_app(
    env: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_timeout_s: float | None = DEFAULT_SESSION_TIMEOUT_S,
) -> Any:
    """The FastAPI app serving `collabzoo.make(env, **env_kwargs)` over OpenEnv.

    The env is built, and a copy of it reset, once here, so a bad name, argument or missing
    data fails now, with the env's own error, rather than in every client's first session;
    sessions start as copies of the env as built (not yet reset)."""
    entry = resolve(env)
    prototype = make(entry.id, **dict(env_kwargs or {}))
    sessions = _Sessions()
    probe = CollabZooEnvironment(copy.deepcopy(prototype), entry.id, sessions)
    _ = probe.state  # refuses envs whose spaces are not text
    probe.env.reset(seed=0)  # loads the task data, which copies share with the prototype
    probe.close()

    def new_session() -> CollabZooEnvironment:
        return CollabZooEnvironment(copy.deepcopy(prototype), entry.id, sessions)

    app = create_app(
        new_session,
        JointAction,
        TeamObservation,
        env_name=entry.short_name,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=session_timeout_s
        ),
    )
    app.router.on_shutdown.append(_closer(prototype))
    app.state.collabzoo_env = prototype
    app.state.collabzoo_env_id = entry.id
    return app


def _closer(env: ParallelEnv) -> Callable[[], Any]:
    async def close() -> None:
        env.close()

    return close


def run_server(app: Any, *, host: str = "127.0.0.1", port: int = 8000) -> int:
    """Serve `app` with uvicorn until interrupted (what `collabzoo serve` runs); 0 on a clean
    stop, 1 when the server could not start (uvicorn has said why)."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level="warning", ws_max_size=1 << 27)
    )
    server.run()
    return 0 if server.started else 1


# ----- the client -----------------------------------------------------------------------------


class _LoopThread:
    """One asyncio loop on a daemon thread for every `RemoteEnv` of the process: OpenEnv's
    client is async, the PettingZoo API is not, and a loop per env copy would be a thread per
    branch of a rollout tree."""

    _instance: ClassVar[_LoopThread | None] = None
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, name="collabzoo-openenv-client", daemon=True)
        self.thread.start()
        ready.wait()
        self._idle: dict[str, list[GenericEnvClient]] = {}
        self._idle_lock = threading.Lock()
        atexit.register(self.hang_up_idle)

    def take_idle(self, url: str) -> GenericEnvClient | None:
        with self._idle_lock:
            kept = self._idle.get(url)
            return kept.pop() if kept else None

    def keep_idle(self, url: str, client: GenericEnvClient) -> bool:
        with self._idle_lock:
            kept = self._idle.setdefault(url, [])
            if len(kept) >= IDLE_SESSIONS_KEPT:
                return False
            kept.append(client)
            return True

    def hang_up_idle(self) -> None:
        """End every kept session (at exit: the server then frees them at once)."""
        with self._idle_lock:
            clients = [c for kept in self._idle.values() for c in kept]
            self._idle.clear()
        if clients and self.thread.is_alive():
            with contextlib.suppress(Exception):
                self.submit(_hang_up_all(clients)).result(timeout=10)

    @classmethod
    def get(cls) -> _LoopThread:
        with cls._guard:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = cls()
            return cls._instance

    def submit(self, coroutine: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)


class RemoteEnvError(RuntimeError):
    """The server failed in a way that is not an input error of the env (it crashed, it is at
    capacity, the session timed out)."""


class RemoteEnv(ParallelEnv):
    """A PettingZoo `ParallelEnv` whose every call runs on a `collabzoo serve` server.

    `reset(seed=None)` sends a seed drawn from the client's own generator (seeded by the last
    explicit seed), so every episode is reproducible and a copy can be made exactly.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "collabzoo_remote_v0",
        "render_modes": [],
        "is_parallelizable": True,
    }

    def __init__(
        self, url: str, *, connect_timeout_s: float = 10.0, message_timeout_s: float = 600.0
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://", "ws", "wss")):
            raise ValueError(
                f"remote_env takes the server's URL, e.g. 'http://127.0.0.1:8000', got {url!r}"
            )
        self.url = url.rstrip("/")
        self._timeouts = (connect_timeout_s, message_timeout_s)
        self._loop = _LoopThread.get()
        self._client = self._new_client()
        self._closed = False
        self._sound = False
        """Whether the session is in a known state (kept for a later copy when released)."""
        state = self._call(self._client.state())
        self._sound = True
        self.env_id: str = state["env_id"]
        self.possible_agents = list(state["possible_agents"])
        self.agents: list[str] = []
        self.observation_spaces = {a: LLMText(n) for a, n in state["observation_max_chars"].items()}
        self.action_spaces = {a: LLMText(n) for a, n in state["action_max_chars"].items()}
        self._seeds = np.random.default_rng()
        self._session: str = state["session"]
        self._state: str | None = None
        self._started = False

    def observation_space(self, agent: str) -> Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> Space:
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        drawn = seed is None
        if drawn:
            seed = int(self._seeds.integers(2**31 - 1))
        team = self._call(self._client.reset(seed=seed, options=options))
        if not drawn:  # the env took it (a bad seed raised the env's own error above)
            self._seeds = np.random.default_rng(seed)
        self._started = True
        return team["observations"], team["infos"]

    def step(
        self, actions: dict[str, str]
    ) -> tuple[
        dict[str, Any],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"step() takes a dict mapping each live agent to its answer (a str), "
                f"got {type(actions).__name__}"
            )
        team = self._call(self._client.step({"actions": dict(actions)}))
        return (
            team["observations"],
            team["rewards"],
            team["terminations"],
            team["truncations"],
            team["infos"],
        )

    def state(self) -> str:
        if not self._started:
            raise RuntimeError("the env has not been reset yet; call reset() first")
        if self._state is None:
            raise NotImplementedError(f"{self.env_id} gives no state()")
        return self._state

    def close(self) -> None:
        """End the session (the server frees its slot at once). An env dropped without
        `close` (a rollout tree's spent branch) instead leaves its session open for this
        process's next copy, while the process keeps fewer than IDLE_SESSIONS_KEPT."""
        if not self._closed:
            self._closed = True
            # the server may be gone already: then there is nothing left to release
            with contextlib.suppress(Exception):
                self._loop.submit(_hang_up(self._client)).result(timeout=2 * self._timeouts[0])

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and self._loop.thread.is_alive():
            self._closed = True
            if not (self._sound and self._loop.keep_idle(self.url, self._client)):
                self._loop.submit(_hang_up(self._client))  # not awaited: never block a collector

    def __deepcopy__(self, memo: dict[int, Any]) -> RemoteEnv:
        """A new session holding a copy of this one's env, made by the server."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(
            {k: v for k, v in self.__dict__.items() if k not in ("_client", "_seeds")}
        )
        clone._seeds = copy.deepcopy(self._seeds)
        clone.possible_agents = list(self.possible_agents)
        clone.agents = list(self.agents)
        clone._closed = False
        clone._sound = False
        if not self._started:  # a fresh session, exactly as a new RemoteEnv would get
            clone._client = self._new_client()
            clone._session = clone._call(clone._client.state())["session"]
            clone._sound = True
            return clone
        kept = self._loop.take_idle(self.url)
        if kept is not None:  # a kept session: the copy overwrites whatever it held
            clone._client = kept
            try:
                clone._call(kept.reset(copy_of=self._session))
                clone._sound = True
                return clone
            except RemoteEnvError:  # it timed out on the server, or the server restarted
                self._loop.submit(_hang_up(kept))
        clone._client = self._new_client()
        clone._call(clone._client.reset(copy_of=self._session))
        clone._sound = True
        return clone

    def _new_client(self) -> GenericEnvClient:
        return GenericEnvClient(
            base_url=self.url,
            connect_timeout_s=self._timeouts[0],
            message_timeout_s=self._timeouts[1],
        )

    def _call(self, coroutine: Any) -> dict[str, Any]:
        """Run one client call; update the local mirror of agents and state from a team
        observation; turn the server's error back into the env's own exception type."""
        if self._closed:
            coroutine.close()
            raise RuntimeError("this RemoteEnv is closed")
        try:
            result = self._loop.submit(coroutine).result()
        except ConnectionError as error:
            self._sound = False
            raise RemoteEnvError(
                f"cannot reach the collabzoo server at {self.url}: {error}; start one with "
                "`collabzoo serve ENV --port N`"
            ) from error
        except RuntimeError as error:  # the server's answer: the env's own error, or another
            raised = _env_error(str(error))
            self._sound = self._sound and not isinstance(raised, RemoteEnvError)
            raise raised from None
        except Exception as error:  # the connection broke mid-call
            self._sound = False
            raise RemoteEnvError(
                f"the session with {self.url} failed: {error!r}; the server closed it (it closes "
                "new sessions at once when it is at capacity: see --max-sessions) or went down"
            ) from error
        if isinstance(result, dict):  # state()
            return result
        team = result.observation
        self.agents = list(team["agents"])
        self._state = team.get("state")
        self._session = team.get("session") or self._session
        return team


async def _hang_up(client: GenericEnvClient) -> None:
    """End the session the way the server expects: a "close" message, then wait for the
    server to close the socket (closing first makes it log a disconnect error)."""
    socket = client._ws
    if socket is not None:
        with contextlib.suppress(Exception):
            await socket.send(json.dumps({"type": "close"}))
            await asyncio.wait_for(socket.wait_closed(), timeout=10)
    await client.close()


async def _hang_up_all(clients: list[GenericEnvClient]) -> None:
    await asyncio.gather(*(_hang_up(c) for c in clients), return_exceptions=True)


def _env_error(message: str) -> Exception:
    """The env's exception from the client's "Server error: Type: text (code: ...)"."""
    text = message.removeprefix("Server error: ")
    text, _, code = text.rpartition(" (code: ")
    kind, sep, detail = text.partition(": ")
    if code.startswith("EXECUTION_ERROR") and sep and kind in _ERROR_TYPES:
        return _ERROR_TYPES[kind](detail)
    if code.startswith("CAPACITY_REACHED"):
        return RemoteEnvError(
            f"{message}; start the server with a larger --max-sessions: a rollout tree holds a "
            f"session per live branch (episodes x K), and each client keeps up to "
            f"{IDLE_SESSIONS_KEPT} released ones for its next copies"
        )
    return RemoteEnvError(message)


def remote_env(url: str, **kwargs: Any) -> RemoteEnv:
    """A PettingZoo `ParallelEnv` backed by a `collabzoo serve` (OpenEnv) server at `url`."""
    return RemoteEnv(url, **kwargs)
