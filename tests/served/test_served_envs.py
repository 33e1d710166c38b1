"""propel's environments as OpenEnv environments, through OpenEnv's own client and a real ``propel serve-env`` server
on loopback: triage returns the same six component values as propel's own reward on the same answers; HumanEval
returns the test-suite reward of the value grader, hacks flagged; both also run in-process."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def openenv(require):
    return require("openenv.core")


def _serve(name):
    from propel.served.process import ServerProcess

    return ServerProcess(name, startup_timeout_s=120).start()


def _client(url):
    from openenv.core.generic_client import GenericEnvClient

    return GenericEnvClient(base_url=url).sync()


def test_triage_over_openenvs_client_equals_propels_own_reward(openenv):
    from propel.records import Sample
    from propel.rewards.triage import submission, triage_rewards
    from propel.served.triage import TOOL_FORMAT, SubmitResolution
    from propel.tasks.triage import TriageTickets, render_ticket, ticket_context
    from propel.testing.triage_attacks import CASES, honest

    tickets = TriageTickets(split="train").tickets[:3]
    rewards = triage_rewards()
    compared, names = 0, set()
    server = _serve("triage")
    try:
        with _client(server.url) as client:
            for ticket in tickets:
                answers = [("honest", honest(ticket))] + [
                    (c.name, c.answer(ticket)) for c in CASES if c.applies(ticket)
                ]
                for name, text in answers:
                    try:
                        action = SubmitResolution(**submission(text).raw)
                    except (TypeError, ValueError):  # not one typed submission (a string confidence, two answers)
                        continue
                    if action.answer_text() != text:  # extra text around the JSON, duplicate keys: not this answer
                        continue
                    first = client.reset(ticket_id=ticket.ticket_id)
                    assert first.observation["prompt"] == render_ticket(ticket, TOOL_FORMAT) and not first.done
                    result = client.step(action.model_dump(exclude={"metadata"}))
                    own = Sample(prompt="", completion=text, context=ticket_context(ticket))
                    values = {r.name: float(r([own])[0]) for r in rewards}
                    assert result.observation["components"] == values, name
                    assert result.reward == pytest.approx(sum(values.values())) and result.done
                    compared, names = compared + 1, names | {name}
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):  # OpenEnv's client: a typed action, checked
                client.reset(ticket_id=tickets[0].ticket_id)
                client.step({"resolution": "x", "citations": "KB-1", "confidence": "high", "escalate": False})
    finally:
        server.stop()
    assert compared >= 60 and {"honest", "x_with_gold_ids", "keyword_stuffing", "wrong_runbook_citing_it"} <= names


def test_triage_in_process_puts_each_component_in_the_observation_metadata(openenv):
    from propel.served.triage import SubmitResolution, TriageEnvironment
    from propel.testing.triage_attacks import honest

    env = TriageEnvironment()
    first = env.reset(seed=7)
    ticket = env.ticket
    assert ticket.ticket_id in first.prompt and first.reward is None
    answer = SubmitResolution(
        resolution=ticket.gold_resolution, citations=list(ticket.gold_ids), confidence=0.9, escalate=ticket.escalate
    )
    assert answer.answer_text() == honest(ticket)
    graded = env.step(answer)
    assert graded.done and graded.reward == pytest.approx(5.99, abs=1e-6)  # docs/triage_rewards.md: the honest total
    assert graded.metadata["components"] == graded.components and set(graded.components) == {
        "format",
        "resolution",
        "grounding",
        "calibration",
        "parsimony",
        "repetition",
    }
    assert {n: env.rubric.get_rubric(n).last_score for n in graded.components} == graded.components
    assert env.state.submitted and env.state.ticket_id == ticket.ticket_id
    with pytest.raises(RuntimeError, match="one submission per ticket"):
        env.step(answer)


def test_humaneval_over_openenvs_client_is_the_value_graders_reward(openenv):
    from propel.records import Sample
    from propel.rewards.code_tests import HACK_PENALTY, TestSuiteReward
    from propel.tasks.humaneval import HumanEvalTasks
    from propel.testing.testsuite_hacks import CORPUS, SINGLE_TASK, single_source

    task = HumanEvalTasks(task_ids=[SINGLE_TASK]).tasks[0]
    picked = {"honest_correct": None, "honest_partial": None, "always_equal_object": None}
    for entry in CORPUS:
        if entry.mode == "single" and entry.task == SINGLE_TASK:
            for key in picked:
                if picked[key] is None and key in (entry.kind, entry.name):
                    picked[key] = entry
    assert all(picked.values())
    grader = TestSuiteReward(grader="value")
    server = _serve("humaneval")
    try:
        with _client(server.url) as client:
            for key, entry in picked.items():
                code = single_source(entry, task)
                first = client.reset(task_id=SINGLE_TASK)
                assert task.prompt.strip() in first.observation["prompt"]
                result = client.step({"code": code})
                own = Sample(prompt="", completion=code, context=task.single_turn_context())
                expected = float(grader([own])[0])
                info = own.info["test_suite"]
                assert result.done and result.reward == pytest.approx(expected), key
                assert result.observation["passed"] == info["passed"]
                assert result.observation["required"] == len(task.hidden) == 4  # the held-out tests pay
                assert set(result.observation["flags"]) == set(info["flags"]) and set(info["flags"]) >= entry.value
                if key == "honest_correct":
                    assert result.reward == 1.0 and result.observation["flags"] == []
                if key == "always_equal_object":
                    assert result.observation["hacked"] and result.reward == -HACK_PENALTY  # below an honest failure
    finally:
        server.stop()
        grader.close()


def test_serve_env_refuses_an_unknown_environment():
    out = subprocess.run(
        [sys.executable, "-m", "propel.cli", "serve-env", "nosuchenv", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "propel: config error: unknown environment 'nosuchenv'" in out.stderr
    listed = subprocess.run([sys.executable, "-m", "propel.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert "serve-env" in listed.stdout


def test_serve_env_listens_on_loopback_and_stops_on_sigterm(openenv):
    server = _serve("triage")
    assert server.url.startswith("http://127.0.0.1:")
    server.stop()
    assert server.proc.returncode == 143 and "propel: serve-env stopped by SIGTERM" in "".join(server.output)


@pytest.mark.parametrize("name", ["triage", "humaneval"])
def test_propels_environments_open_with_their_prompt_as_text_in_the_adapter(openenv, name):
    """Before a submission the observations hold only their prompt: the adapter shows it as text, not JSON."""
    from propel.envs import OpenEnvAgentEnv
    from propel.records import Context, Prompt
    from propel.served.registry import ENVIRONMENTS

    env = OpenEnvAgentEnv(ENVIRONMENTS[name])
    opened = env.reset(Context("c", Prompt(messages=[]), data={"seed": 3}))
    shown = opened.messages[-1]["content"]
    assert shown.startswith(("You are an IT support engineer", "Complete the following Python function"))
    assert env.tool_name == {"triage": "submit_resolution", "humaneval": "submit_solution"}[name]
    env.close()
