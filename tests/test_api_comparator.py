"""The online preference learners' HTTP comparator (comparator_policy="api") against a real
loopback service (`tests/comparator_server.py`): what the pairs carry, what the service is sent,
the requests byte-for-byte as CoMLRL's comparator sends them, its answers read as CoMLRL reads
them, and refused settings and failing services."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    LLMPolicy,
    MADPOIterConfig,
    MADPOIterTrainer,
    MARLHFIterConfig,
    MARLHFIterTrainer,
    tiny_causal_lm,
)
from collabzoo.algos.learners.comparator_api import (  # noqa: E402
    API_FORMATS,
    ComparatorAPI,
    ComparatorAPIError,
    parse_completions,
    plain_json,
)
from collabzoo.algos.learners.preference_rollouts import (  # noqa: E402
    candidate_rollout,
    encode_answer,
)
from collabzoo.algos.policies.sampling import Sampling  # noqa: E402
from collabzoo.joint_sections import split_tagged_prompt, tagged_answer  # noqa: E402
from tests.comparator_server import ComparatorServer  # noqa: E402
from tests.test_preference_learners import SMALL as PREFERENCE_SMALL  # noqa: E402

AGENTS = ("alpha", "beta")
SMALL = {**PREFERENCE_SMALL, "save_steps": 0, "max_updates": 1}
"""Byte-level models from scratch, few candidates: one iteration in a few seconds."""


def winning(prompt: str, k: int) -> str:
    """TinyCoop's winning answer to one agent's prompt (alpha's first character has the turn's
    signal's parity, beta's the other), tagged with the candidate's index k."""
    agent = "alpha" if "tinycoop alpha" in prompt else "beta"
    signal = int(re.search(r"s=(\d)", prompt).group(1))
    odd = (signal == 1) == (agent == "alpha")
    return ("a" if odd else "b") + str(k)


def winner(prompt: str, n: int) -> list[str]:
    return [winning(prompt, k) for k in range(n)]


def team() -> dict[str, LLMPolicy]:
    return {a: LLMPolicy(*tiny_causal_lm(seed=k)) for k, a in enumerate(AGENTS)}


def tinycoop():
    return collabzoo.make("tinycoop")


def replayed(path) -> list[dict]:
    return json.loads((path / "preference_replay" / "iteration_0000.json").read_text())


def test_madpo_iter_pairs_carry_the_services_answers_sent_as_configured(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("CZ_TEST_COMPARATOR_KEY", "s3cret")
    with ComparatorServer(winner) as server:
        args = MADPOIterConfig(
            output_dir=str(tmp_path),
            **SMALL,
            comparator_policy="api",
            comparator_api_url=server.url,
            comparator_num_candidates=3,
            comparator_api_model="cmp-7b",
            comparator_api_headers={"X-Team": "zoo"},
            comparator_api_key_env="CZ_TEST_COMPARATOR_KEY",
            comparator_api_extra_body={"seed": 7, "stop": ["</a>"]},
        )
        trainer = MADPOIterTrainer(env=tinycoop, models=team(), args=args)
        logged = trainer.train()
    # One request per episode and agent, each for C' answers, sent as configured.
    assert len(server.seen) == SMALL["preference_num_items"] * len(AGENTS)
    for seen in server.seen:
        body = seen.body
        agent = AGENTS[body["agent_idx"]]
        assert body["prompt"] == body["batch_item"]["observations"][agent]
        assert body["num_return_sequences"] == 3
        assert body["model"] == "cmp-7b"
        assert (body["seed"], body["stop"]) == (7, ["</a>"])
        assert (body["max_new_tokens"], body["temperature"], body["top_k"]) == (1, 1.0, None)
        assert seen.headers["authorization"] == "Bearer s3cret"
        assert seen.headers["x-team"] == "zoo"
        assert body["batch_item"]["infos"][agent]["role"] == agent
    assert {s.body["batch_item"]["seed"] for s in server.seen} == {500_000, 500_001}
    # The service always wins; every pair is its joint answer over a losing candidate.
    assert logged["iter/comparator_reward_mean"] == 1.0
    pairs = replayed(tmp_path)
    assert len(pairs) == logged["iter/current_preference_pairs"] >= 1
    assert logged["iter/train_preference_pairs"] == len(pairs)
    tokenizer = trainer.policies["alpha"].tokenizer
    for pair in pairs:
        assert pair["source"] == "comparator"
        assert (pair["chosen_reward"], pair["rejected_reward"]) == (1.0, 0.0)
        index = {int(pair["chosen"][a][1:]) for a in AGENTS}
        assert len(index) == 1  # candidate k is every agent's k-th answer
        k = index.pop()
        for agent in AGENTS:
            assert pair["chosen"][agent] == winning(pair["prompts"][agent], k)
            expected = tokenizer(pair["chosen"][agent], add_special_tokens=False)["input_ids"]
            assert pair["chosen_ids"][agent] == list(expected)
    assert logged["loss"] > 0 and logged["optimizer_steps"] >= 1


def test_marlhf_iter_against_an_openai_chat_service_split_by_max_n(tmp_path) -> None:
    with ComparatorServer(winner, layout="openai_chat") as server:
        args = MARLHFIterConfig(
            output_dir=str(tmp_path),
            **SMALL,
            rollout_buffer_size=2,
            num_generations=2,
            comparator_policy="api",
            comparator_api_url=server.url,
            comparator_api_format="openai_chat",
            comparator_api_model="served-model",
            comparator_api_max_n_per_request=2,
            comparator_num_candidates=5,
        )
        logged = MARLHFIterTrainer(env=tinycoop, models=team(), args=args).train()
    # Per episode and agent: C' = 5 answers asked for as n = 2, 2, 1.
    requests = SMALL["preference_num_items"] * len(AGENTS)
    assert sorted(s.body["n"] for s in server.seen) == sorted([2, 2, 1] * requests)
    prompts = [s.body["messages"][0]["content"] for s in server.seen]
    assert all(
        sum(s.body["n"] for s in server.seen if s.body["messages"][0]["content"] == p) % 5 == 0
        for p in prompts
    )
    assert all(s.body["model"] == "served-model" for s in server.seen)
    assert all(s.body["max_tokens"] == 1 and "top_k" not in s.body for s in server.seen)
    pairs = replayed(tmp_path)
    assert logged["iter/current_preference_pairs"] == len(pairs) >= 1
    # Answers of a split request keep their order: the second request's k restarts at 0.
    assert all(
        p["chosen"][a] == winning(p["prompts"][a], int(p["chosen"][a][1:]))
        for p in pairs
        for a in AGENTS
    )
    assert logged["iter/comparator_reward_mean"] == 1.0
    assert logged["reward_model/train_pairs"] == len(pairs)  # the RM learnt from these pairs


def test_a_centralized_service_answers_the_joint_prompt_split_into_sections(tmp_path) -> None:
    """The service writes tagged joint answers, the last of each request without any tag:
    the tagged ones become the agents' answers, the untagged one is counted and skipped."""

    def coordinator(prompt: str, n: int) -> list[str]:
        roles = split_tagged_prompt(prompt)
        assert len(roles) == len(AGENTS)
        tagged = [tagged_answer([winning(p, k) for p in roles]) for k in range(n - 1)]
        return [*tagged, "no sections at all"]

    with ComparatorServer(coordinator) as server:
        args = MADPOIterConfig(
            output_dir=str(tmp_path),
            **SMALL,
            comparator_policy="api",
            comparator_api_url=server.url,
            comparator_generation_mode="centralized",
            comparator_centralized_agent="beta",
            comparator_num_candidates=3,
        )
        logged = MADPOIterTrainer(env=tinycoop, models=team(), args=args).train()
    assert len(server.seen) == SMALL["preference_num_items"]  # one request per episode
    assert all(
        s.body["agent_idx"] == 1 and s.body["num_return_sequences"] == 3 for s in server.seen
    )
    assert logged["comparator_unparsed"] == SMALL["preference_num_items"]
    pairs = replayed(tmp_path)
    assert len(pairs) >= 1
    for pair in pairs:
        k = int(pair["chosen"]["alpha"][1:])
        assert k < 2 and pair["source"] == "comparator"
        assert all(pair["chosen"][a] == winning(pair["prompts"][a], k) for a in AGENTS)


# ----- parity with CoMLRL's comparator ------------------------------------------------------------
def comlrl_comparator(args: SimpleNamespace):
    """CoMLRL 1.4.3's MADPOIter trainer with only its settings: enough for its comparator's
    request, send and parse methods, which read nothing but `args`."""
    module = require_module("comlrl.trainers.preference.iterative", "interop")
    trainer = module.MADPOIterTrainer.__new__(module.MADPOIterTrainer)
    trainer.args = args
    return trainer


def settings(url: str, fmt: str, **over) -> SimpleNamespace:
    fields = {
        "comparator_api_url": url,
        "comparator_api_format": fmt,
        "comparator_api_model": "m-1",
        "comparator_api_max_n_per_request": None,
        "comparator_api_timeout": 30.0,
        "comparator_api_retries": 0,
        "comparator_api_headers": {"X-Team": "zoo"},
        "comparator_api_key": None,
        "comparator_api_key_env": "CZ_TEST_COMPARATOR_KEY",
        "comparator_api_key_header": "Authorization",
        "comparator_api_key_prefix": "Bearer",
        "comparator_api_response_field": "completions",
        "comparator_api_extra_body": {"seed": 3},
        "max_new_tokens": 12,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
    }
    return SimpleNamespace(**{**fields, **over})


@pytest.mark.parametrize(
    ("fmt", "over"),
    [
        ("generic", {}),
        ("generic", {"comparator_api_model": None, "comparator_api_response_field": "out.texts"}),
        ("openai_chat", {"comparator_api_max_n_per_request": 2}),
        ("openai_chat", {"comparator_api_model": "deepseek-chat"}),  # no n at DeepSeek
        (
            "openai_responses",
            {"comparator_api_key_header": "api-key", "comparator_api_key_prefix": ""},
        ),
        ("anthropic", {}),  # the key moves to x-api-key, bare
    ],
)
def test_requests_and_answers_are_comlrls(fmt, over, monkeypatch) -> None:
    monkeypatch.setenv("CZ_TEST_COMPARATOR_KEY", "s3cret")
    field = over.get("comparator_api_response_field", "completions")
    item = {"seed": 5, "observations": {"alpha": "p"}, "infos": {"alpha": {"turn": 0}}}
    sent, got = [], []
    for side in ("comlrl", "collabzoo"):
        with ComparatorServer(winner, layout=fmt, response_field=field) as server:
            args = settings(server.url, fmt, **over)
            if side == "comlrl":
                texts = comlrl_comparator(args)._call_comparator_api(
                    prompt="tinycoop beta r1/1 s=0 >",
                    agent_idx=1,
                    batch_item=item,
                    num_candidates=5,
                )
            else:
                sampling = Sampling(args.max_new_tokens, args.temperature, args.top_p, args.top_k)
                api = ComparatorAPI(args, sampling)
                texts = api.complete("tinycoop beta r1/1 s=0 >", 5, 1, item)
        port_free = [{k: v for k, v in s.headers.items() if k != "host"} for s in server.seen]
        sent.append([(s.path, h, s.body) for s, h in zip(server.seen, port_free, strict=True)])
        got.append(texts)
    assert sent[0] == sent[1]  # the same requests, headers included
    assert got[0] == got[1]
    assert len(got[1]) == 5 and got[1][0].startswith("a")
    headers = sent[1][0][1]
    if fmt == "anthropic":
        assert headers["x-api-key"] == "s3cret" and headers["anthropic-version"] == "2023-06-01"
    elif fmt == "openai_responses":
        assert headers["api-key"] == "s3cret"
    else:
        assert headers["authorization"] == "Bearer s3cret"


RESPONSES = [
    {"completions": ["x", "y"]},
    {"completions": "one text"},
    {"completions": [{"text": "t"}, {"content": "c"}, {"message": {"content": "m"}}, 3, None]},
    {"completions": [{"text": "", "response": ""}, {"completion": "k"}, {"other": 1}]},
    {"responses": ["r"]},
    {"completions": [], "outputs": ["o"], "choices": ["ch"]},
    {"completions": "", "choices": ""},
    {"out": {"texts": ["deep"]}},
    {"nothing": True},
    ["not", "an", "object"],
    {"choices": [{"message": {"content": "hi"}}, {"text": "old"}, "junk", {"message": {}}]},
    {"choices": {"not": "a list"}},
    {"content": [{"type": "text", "text": "A"}, {"type": "tool_use"}, {"type": "text"}]},
    {
        "output": [
            {"content": [{"type": "output_text", "text": "R"}, {"type": "text", "text": "S"}]}
        ]
    },
    {"output": [{"type": "reasoning"}, "junk", {"content": "not a list"}]},
]


@pytest.mark.parametrize("fmt", API_FORMATS)
@pytest.mark.parametrize("field", ["completions", "out.texts", None])
def test_answers_are_read_as_comlrl_reads_them(fmt, field) -> None:
    theirs = comlrl_comparator(
        settings("http://127.0.0.1:9/", fmt, comparator_api_response_field=field)
    )
    for response in RESPONSES:
        expected = theirs._extract_api_completions(response, api_format=fmt)
        assert parse_completions(response, fmt, field) == expected, response


# ----- refused settings and failing services ------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "needs comparator_api_url"),
        ({"comparator_api_url": "127.0.0.1:8000/v1"}, "starting with http:// or https://"),
        (
            {"comparator_api_url": "http://h/", "comparator_api_format": "grpc"},
            "comparator_api_format must be one of",
        ),
        (
            {"comparator_api_url": "http://h/", "comparator_api_key_env": "CZ_TEST_UNSET_KEY"},
            "export CZ_TEST_UNSET_KEY=",
        ),
        (
            {"comparator_api_url": "http://h/", "comparator_api_max_n_per_request": 2},
            "splits openai_chat requests only",
        ),
        (
            {"comparator_api_url": "http://h/", "comparator_api_timeout": 0},
            "comparator_api_timeout must be positive",
        ),
        (
            {"comparator_api_url": "http://h/", "comparator_api_headers": {"X": 1}},
            "must map text to text",
        ),
    ],
)
def test_bad_api_settings_are_refused(tmp_path, monkeypatch, fields, message) -> None:
    monkeypatch.delenv("CZ_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ValueError, match=re.escape(message)):
        MADPOIterConfig(output_dir=str(tmp_path), comparator_policy="api", **fields)


def test_a_url_without_the_api_comparator_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match='set comparator_policy="api"'):
        MADPOIterConfig(output_dir=str(tmp_path), comparator_api_url="http://h/")


def test_a_failing_service_stops_training_naming_url_and_status(tmp_path) -> None:
    with ComparatorServer(winner, fail_first=10**6) as server:
        args = MADPOIterConfig(
            output_dir=str(tmp_path),
            **SMALL,
            comparator_policy="api",
            comparator_api_url=server.url,
        )
        trainer = MADPOIterTrainer(env=tinycoop, models=team(), args=args)
        with pytest.raises(ComparatorAPIError, match=re.escape(f"{server.url} answered HTTP 500")):
            trainer.train()


def test_retries_get_past_a_failure_and_give_up_after_the_last(monkeypatch) -> None:
    monkeypatch.setattr("collabzoo.algos.learners.comparator_api.RETRY_BASE_SECONDS", 0.01)
    sampling = Sampling(4, 1.0, 1.0, None)
    with ComparatorServer(winner, fail_first=1, fail_status=503) as server:
        api = ComparatorAPI(
            settings(server.url, "generic", comparator_api_key_env=None, comparator_api_retries=1),
            sampling,
        )
        assert api.complete("tinycoop alpha r1/1 s=1 >", 2) == ["a0", "a1"]
        assert len(server.seen) == 2
    with ComparatorServer(winner, fail_first=10, fail_status=502) as server:
        api = ComparatorAPI(
            settings(server.url, "generic", comparator_api_key_env=None, comparator_api_retries=2),
            sampling,
        )
        with pytest.raises(ComparatorAPIError, match=r"answered HTTP 502 \(after 3 tries\)"):
            api.complete("p", 2)
        assert len(server.seen) == 3
    with ComparatorServer(winner, fail_first=10, fail_status=401) as server:  # not retried
        api = ComparatorAPI(
            settings(server.url, "generic", comparator_api_key_env=None, comparator_api_retries=2),
            sampling,
        )
        with pytest.raises(ComparatorAPIError, match=r"answered HTTP 401: .*scripted failure"):
            api.complete("p", 2)
        assert len(server.seen) == 1
    url = server.url  # closed now: nothing listens there
    api = ComparatorAPI(settings(url, "generic", comparator_api_key_env=None), sampling)
    with pytest.raises(
        ComparatorAPIError, match=re.escape(f"comparator API {url} failed after 1 try")
    ):
        api.complete("p", 2)


def test_an_answer_without_texts_says_what_was_expected() -> None:
    with ComparatorServer(winner, response_field="data") as server:
        api = ComparatorAPI(
            settings(server.url, "generic", comparator_api_key_env=None),
            Sampling(4, 1.0, 1.0, None),
        )
        with pytest.raises(
            ComparatorAPIError,
            match=r"expected a list of texts under 'completions'.*got \['data'\]",
        ):
            api.complete("tinycoop alpha r1/1 s=1 >", 2)


# ----- the command line ---------------------------------------------------------------------------
def test_the_command_line_trains_against_the_service(tmp_path, monkeypatch, capsys) -> None:
    from collabzoo.cli import main

    monkeypatch.setenv("CZ_TEST_COMPARATOR_KEY", "s3cret")
    with ComparatorServer(winner, layout="openai_chat") as server:
        code = main(
            [
                "train", "madpo-iter", "--env", "tinycoop", "--model", "tiny",
                "--output", str(tmp_path), "--updates", "1",
                "--set", "max_new_tokens=1", "--set", "preference_num_candidates=4",
                "--set", "preference_num_items=2", "--set", "train_batch_size=2",
                "--set", "progress=false", "--set", "tensorboard=false", "--set", "save_steps=0",
                "--set", "comparator_policy=api", "--set", f"comparator_api_url={server.url}",
                "--set", "comparator_api_format=openai_chat", "--set", "comparator_api_model=m",
                "--set", 'comparator_api_headers={"X-Team": "zoo"}',
                "--set", "comparator_api_key_env=CZ_TEST_COMPARATOR_KEY",
                "--set", 'comparator_api_extra_body={"seed": 11}',
            ]
        )  # fmt: skip
    assert code == 0, capsys.readouterr().err[-2000:]
    assert len(server.seen) == 2 * len(AGENTS)
    assert all(s.body["seed"] == 11 and s.body["n"] == 4 for s in server.seen)
    assert all(s.headers["x-team"] == "zoo" for s in server.seen)
    assert all(s.headers["authorization"] == "Bearer s3cret" for s in server.seen)
    assert len(replayed(tmp_path)) >= 1


def test_the_command_line_refuses_api_without_a_url(capsys) -> None:
    from collabzoo.cli import main

    argv = ["train", "madpo-iter", "--env", "tinycoop", "--model", "tiny", "--output", "unused"]
    argv += ["--set", "comparator_policy=api"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "needs comparator_api_url" in err


def test_candidate_k_needs_every_agents_kth_answer_and_extra_answers_are_dropped(
    tmp_path,
) -> None:
    """A generic service answering alpha with C' + 2 texts and beta with C' - 1: the episode
    gets C' - 1 candidates, each every agent's k-th answer in order, rewarded by the env."""

    def uneven(prompt: str, n: int) -> list[str]:
        return winner(prompt, n + 2 if "tinycoop alpha" in prompt else n - 1)

    with ComparatorServer(uneven) as server:
        args = MADPOIterConfig(
            output_dir=str(tmp_path),
            **SMALL,
            comparator_policy="api",
            comparator_api_url=server.url,
        )
        trainer = MADPOIterTrainer(env=tinycoop, models=team(), args=args)
        roots = candidate_rollout(trainer, trainer.policies, 2).build([3, 4], 1.0)
        candidates = trainer.source._api_candidates(roots, 3, centralized=False)
    assert [len(c) for c in candidates] == [2, 2]
    for root, found in zip(roots, candidates, strict=True):
        for k, (texts, ids, reward) in enumerate(found):
            assert texts == {a: winning(root.observations[a], k) for a in AGENTS}
            assert ids["beta"] == encode_answer(trainer.policies["beta"], texts["beta"])
            assert reward == 1.0


def test_a_comparator_team_with_the_api_comparator_is_refused(tmp_path) -> None:
    args = MADPOIterConfig(
        output_dir=str(tmp_path), **SMALL, comparator_policy="api", comparator_api_url="http://h/"
    )
    with pytest.raises(ValueError, match='a comparator= team is for comparator_policy="model"'):
        MADPOIterTrainer(env=tinycoop, models=team(), args=args, comparator=team())


@pytest.mark.parametrize(
    "item",
    [
        {"seed": 1, "text": "x"},
        {"n": np.int64(3), "x": np.float32(0.5), 2: (1, "a"), "s": {1}},
        [np.bool_(True), Path("runs/x")],
        ("a", {"b": np.array([1, 2])}),
    ],
)
def test_batch_items_are_made_json_as_comlrl_makes_them(item) -> None:
    expected = comlrl_comparator(settings("http://h/", "generic"))._jsonable(item)
    assert plain_json(item) == expected
    json.dumps(plain_json(item))
