"""Any OpenEnv environment as a propel agent environment: an environment written with OpenEnv alone
(``openenv_guess``), driven in-process and through a real OpenEnv server on loopback (``propel serve-env``, started and
stopped here), gives the same episodes; turn rewards are the environment's; a rejected action is an observation; an
episode cut by length ends with the environment's return so far; a server that is unreachable or killed mid-episode is
an infrastructure failure and the next episodes reconnect."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import pytest

from propel.engines.engine import SamplingSpec
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import parse_tool_call
from propel.records import Context, Prompt
from propel.rollouts.episode_runner import EpisodeRunner

HERE = Path(__file__).resolve().parent
GUESS = "openenv_guess.GuessEnvironment"
SEEDS = (2, 3, 5, 6)  # even: the oracle (right at once); odd: bisection; multiples of 3 open with a rejected guess
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def openenv(require):
    return require("openenv.core")


@pytest.fixture()
def server(openenv):
    from propel.served.process import ServerProcess

    proc = ServerProcess(GUESS, pythonpath=[HERE], startup_timeout_s=120).start()
    yield proc
    proc.stop()


def _contexts(seeds=SEEDS):
    return [Context(f"game-{s}", Prompt(messages=[]), data={"seed": s}) for s in seeds]


def _run(tokenizer, make_env, hook=None, seeds=SEEDS):
    from openenv_policy import guess_policy

    def script(prompt):
        if hook is not None:
            hook(prompt)
        return guess_policy(prompt)

    runner = EpisodeRunner(ScriptedEngine(tokenizer, script), make_env, concurrency=8)
    groups, _ = runner.run(_contexts(seeds), SamplingSpec(n=2, max_new_tokens=64))
    return [s for g in groups for s in g]


def _replay(sample):
    """The environment's own rewards for the episode's valid actions, from a fresh in-process instance."""
    from openenv_guess import GuessAction, GuessEnvironment

    env = GuessEnvironment()
    env.reset(seed=sample.context.data["seed"])
    rewards = []
    for turn in sample.turns:
        if turn.role == "assistant":
            guess = parse_tool_call(turn.text).arguments["guess"]
            rewards.append(None if not 1 <= guess <= 16 else env.step(GuessAction(guess=guess)).reward)
    return rewards


def test_the_tool_is_the_action_class_in_process_and_from_the_server(openenv, server):
    from propel.envs import OpenEnvAgentEnv

    local, remote = OpenEnvAgentEnv(env=GUESS).tools, OpenEnvAgentEnv(server.url).tools
    assert local == remote
    fn = local[0]["function"]
    assert fn["name"] == "guess" and fn["description"] == "Guess the hidden number."
    assert fn["parameters"]["required"] == ["guess"] and "metadata" not in fn["parameters"]["properties"]
    assert fn["parameters"]["properties"]["guess"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 16,
        "description": "your guess",
    }


def test_in_process_and_server_episodes_agree_and_turn_rewards_are_the_environments(openenv, server, tokenizer):
    from propel.envs import OpenEnvAgentEnv

    local = _run(tokenizer, partial(OpenEnvAgentEnv, env=GUESS))
    remote = _run(tokenizer, partial(OpenEnvAgentEnv, server.url))
    assert [(s.prompt_ids, s.response_ids) for s in local] == [(s.prompt_ids, s.response_ids) for s in remote]
    for a, b in zip(local, remote, strict=True):
        assert [(t.text, t.info.get("reward")) for t in a.turns] == [(t.text, t.info.get("reward")) for t in b.turns]
    for s in remote:
        seed = s.context.data["seed"]
        assert s.infra_error is None and s.info["finish_reason"] == "submitted" and s.turns[-1].text == "right"
        tool_turns = [t for t in s.turns if t.role == "tool"]
        assert [t.info.get("reward") for t in tool_turns] == _replay(s)  # the environment's, value by value
        assert s.info["reward"] == pytest.approx(sum(r for r in _replay(s) if r is not None))  # its return
        rejected = seed % 3 == 0
        assert s.info["tool_errors"] == int(rejected)
        if rejected:  # pydantic's message, as an observation the model reads; the episode goes on
            assert tool_turns[0].text == "error: invalid_action: guess: Input should be less than or equal to 16"
            assert "reward" not in tool_turns[0].info and tool_turns[0].info["error"].startswith("invalid_action")
        assert s.info["turns"] == {2: 1, 3: 2, 5: 4, 6: 2}[seed]  # 5 hides 9: bisection guesses 8, 12, 10, 9
        assert (s.info["reward"] == 1.0) == (seed != 5)


def test_malformed_calls_are_observations_with_their_turn_reward(openenv):
    from propel.envs import OpenEnvAgentEnv

    env = OpenEnvAgentEnv(env=GUESS, malformed_call_reward=-0.25, max_turns=3)
    env.reset(_contexts([5])[0])
    prose = env.step("I think it is seven.")
    assert prose.content.startswith("error: no_tool_call") and prose.turn_reward == -0.25 and not prose.done
    other = env.step('<tool_call>{"name": "shout", "arguments": {"guess": 7}}</tool_call>')
    assert other.content == "error: unknown_tool: 'shout'; the tool is 'guess'" and not other.done
    last = env.step('<tool_call>{"name": "guess", "arguments": {"guess": "seven"}}</tool_call>')
    assert last.done and last.finish_reason == "max_turns" and last.reward == 0.0
    assert (
        last.content
        == "error: invalid_action: guess: Input should be a valid integer, unable to parse string as an integer"
    )
    assert env.state.infra_error is None and env.state.verifier == {"return": 0.0, "env_done": False, "steps": 3}


@pytest.mark.parametrize("mode", ["in_process", "server"])
def test_an_episode_cut_by_length_ends_with_the_return_so_far(mode, openenv, tokenizer, request):
    """A turn cut by ``max_new_tokens``, or a tool result past the context: ``length``, the environment's return."""
    from openenv_guess import target, turn_reward
    from openenv_policy import RAMBLE, guess_policy

    from propel.envs import OpenEnvAgentEnv

    make = partial(OpenEnvAgentEnv, GUESS if mode == "in_process" else request.getfixturevalue("server").url)
    first_guess = turn_reward(8, target(5))  # game 5 hides 9: bisection opens with 8, "higher"

    def run(script, **limits):
        runner = EpisodeRunner(ScriptedEngine(tokenizer, script), make, concurrency=8, **limits)
        return runner.run(_contexts((5,)), SamplingSpec(n=2, max_new_tokens=64))[0][0]

    cut_turn = run(lambda prompt: RAMBLE if "<|im_start|>tool" in prompt else guess_policy(prompt))
    assert all(s.turns[-1].role == "assistant" and s.turns[-1].finish_reason == "length" for s in cut_turn)
    room = len(cut_turn[0].prompt_ids) + len(cut_turn[0].turns[0].token_ids) + 1  # the first call; no tool result
    full_context = run(guess_policy, max_context_tokens=room)
    assert all([t.role for t in s.turns] == ["assistant"] for s in full_context)
    for s in cut_turn + full_context:
        assert s.infra_error is None and s.valid and s.info["finish_reason"] == "length"
        assert s.info["reward"] == first_guess and s.info["reward_components"] == {"return": first_guess}
        assert s.artifacts["verifier"] == {"return": first_guess, "env_done": False, "steps": 1}


def test_a_server_killed_mid_episode_is_infra_and_later_episodes_reconnect(openenv, server, tokenizer):
    from propel.envs import OpenEnvAgentEnv

    restarted = threading.Event()

    def kill_once(prompt):  # the first prompt that already holds a tool result: some episodes are still running
        if "<|im_start|>tool" in prompt and not restarted.is_set():
            restarted.set()
            server.kill()
            threading.Timer(1.0, server.start, kwargs={"port": server.port}).start()  # back, after resets began

    make = partial(OpenEnvAgentEnv, server.url, retries=6, backoff_s=0.5)
    samples = _run(tokenizer, make, hook=kill_once)
    lost = [s for s in samples if s.infra_error]
    finished = [s for s in samples if not s.infra_error]
    assert lost and finished  # the oracle's one-turn games ended before the kill
    assert all(s.context.data["seed"] in (2,) for s in finished) and all(s.info["reward"] == 1.0 for s in finished)
    for s in lost:
        assert s.info["finish_reason"] == "error" and "connection lost mid-episode" in s.infra_error
        assert not s.valid and s.info["reason"] == "infra_error"
    again = _run(tokenizer, make)  # the server is back on the same port: new episodes connect (with retries)
    assert all(s.infra_error is None and s.turns[-1].text == "right" for s in again)


def test_an_unreachable_server_is_retried_then_infra(openenv, tokenizer):
    import socket

    from propel.envs import OpenEnvAgentEnv

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    make = partial(OpenEnvAgentEnv, f"http://127.0.0.1:{port}", retries=1, backoff_s=0.05, connect_timeout_s=2)
    samples = _run(tokenizer, make, seeds=(2,))
    assert all("after 2 attempts" in s.infra_error and s.info["finish_reason"] == "error" for s in samples)
    assert all(s.turns == [] for s in samples)
