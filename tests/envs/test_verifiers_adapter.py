"""The verifiers adapter on small environments written here (``vf_cases``): the task source, the episode driven as
verifiers' rollout loop drives it (stop conditions, env_response, a final message, the cut turn the environment never
sees, an environment that raises) and the rubric as components (each function's judgement, NaN where it could not
judge, never a made-up 0: a penalty that raises on a reply does not make the reply penalty-free)."""

from __future__ import annotations

import math

import pytest
import torch

SINGLE = "vf_cases"
COUNTING = "vf_cases:load_counting"


@pytest.fixture(scope="module")
def verifiers(require):
    return require("verifiers.envs.multiturn_env")


def _episode(context, *replies: str, cut: bool = False):
    """A finished episode of ``context``'s environment as the episode runner would record it."""
    from propel.envs import VerifiersAgentEnv
    from propel.records import Sample, Turn

    env = VerifiersAgentEnv(max_turns=4)
    obs = env.reset(context)
    sample = Sample(prompt="", completion="", context=context)
    for reply in replies:
        sample.turns.append(Turn("assistant", reply))
        obs = env.step(reply)
        if obs.content:
            sample.turns.append(Turn(obs.role, obs.content, trainable=False))
        if obs.done:
            break
    if cut:
        obs = env.end("length")
    assert obs.done
    sample.completion = "\n".join(sample.assistant_texts)
    sample.artifacts["verifier"] = dict(env.state.verifier)
    sample.info.update(finish_reason=obs.finish_reason)
    return sample, env


def test_tasks_are_the_environments_rows_deterministic_in_the_seed(verifiers):
    from propel.errors import ConfigError
    from propel.tasks import VerifiersTasks

    tasks = VerifiersTasks(SINGLE, {"rows": 3})
    a, b = tasks.contexts(6, seed=1), tasks.contexts(6, seed=1)
    assert [c.id for c in a] == [c.id for c in b] and len({c.id for c in tasks.contexts(12, seed=2)}) > 1
    first = a[0]
    assert first.prompt.messages == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": first.data["row"]["question"]},
    ]
    assert first.data["env"] == SINGLE and first.data["row"]["answer"] == "blue"
    assert "blue" not in str(first.prompt.messages)  # the gold answer rides in the data, not the prompt
    with pytest.raises(ConfigError, match="split"):
        VerifiersTasks(SINGLE, split="test")
    with pytest.raises(ConfigError, match="cannot load"):
        VerifiersTasks("no_such_environment_module").contexts(1)


def test_the_rubric_is_one_component_per_function_and_judges_only_what_it_can(verifiers):
    from propel.losses.scorable import judged
    from propel.rewards import CombinedReward, VerifiersRubric
    from propel.tasks import VerifiersTasks

    context = VerifiersTasks(SINGLE).contexts(1)[0]
    replies = ["blue", "red!", "boom", "skip"]
    samples = [_episode(context, r)[0] for r in replies]
    assert all(s.info["finish_reason"] == "submitted" for s in samples)
    rubric = VerifiersRubric(SINGLE)
    combined = CombinedReward([rubric])
    names = ["rubric.exact", "rubric.brevity", "rubric.penalty", "rubric.share", "rubric.num_turns"]
    assert [c.name for c in combined.components] == names
    out = combined(samples)
    assert out.weights == dict(zip(names, [1.0, 0.5, 1.0, 0.0, 0.0], strict=True))
    assert out.components["rubric.exact"].tolist() == [1.0, 0.0, 0.0, 0.0]  # sync, messages read as dicts
    assert out.components["rubric.brevity"].tolist() == pytest.approx([-0.04, -0.04, -0.04, -0.04])  # async, .content
    penalty = out.components["rubric.penalty"]
    assert penalty[:2].tolist() == [0.0, -1.0] and penalty[2:].isnan().all()  # raised / None: not judged, not 0
    assert out.components["rubric.share"].tolist() == [0.25] * 4  # a group function sees the whole group
    assert out.components["rubric.num_turns"].tolist() == [1.0] * 4
    assert out.extras["rubric.penalty/raised"] == 1.0
    # the samples the penalty could not judge are not compared, penalty-free, with those it judged
    assert out.judged(group_size=4).tolist() == [True, True, False, False]
    parts = torch.stack([out.components[n] for n in names], dim=1)
    assert judged(parts, list(out.weights.values()), 4).tolist() == [True, True, False, False]
    # used whole (not expanded), the rubric is the weighted sum of what judged each sample
    whole = rubric(samples)
    assert whole[:2].tolist() == pytest.approx([1.0 - 0.02, -1.0 - 0.02]) and whole[2:].tolist() == pytest.approx(
        [-0.02, -0.02]
    )


def test_a_lost_episode_or_another_environments_sample_is_never_scored(verifiers):
    from propel.errors import ConfigError
    from propel.records import Sample
    from propel.rewards import CombinedReward, VerifiersRubric
    from propel.tasks import VerifiersTasks

    context = VerifiersTasks(SINGLE).contexts(1)[0]
    good, _ = _episode(context, "blue")
    lost = Sample(prompt="", completion="blue", context=context, infra_error="engine raised")
    out = CombinedReward([VerifiersRubric(SINGLE)])([good, lost])
    assert out.total[0] == pytest.approx(0.98) and math.isnan(out.total[1])
    assert all(math.isnan(v[1]) for v in out.components.values())
    with pytest.raises(ConfigError, match="not one"):
        VerifiersRubric(SINGLE)([Sample(prompt="", completion="blue", context=context)])
    other = VerifiersTasks(COUNTING).contexts(1)[0]
    with pytest.raises(ConfigError, match="comes from"):
        VerifiersRubric(SINGLE)([_episode(other, "done")[0]])


def test_a_reply_cut_at_the_token_budget_is_scored_as_written(verifiers, tokenizer):
    """With execute_cut_turns (the config's setting), a cut reply is the policy's reply, as in verifiers: the rubric
    scores it. Without it the environment never sees the cut turn and scores the episode as it stands."""
    from propel.engines.engine import SamplingSpec
    from propel.engines.scripted import ScriptedEngine
    from propel.envs import VerifiersAgentEnv
    from propel.rewards import CombinedReward, VerifiersRubric
    from propel.rollouts.episode_runner import EpisodeRunner
    from propel.tasks import VerifiersTasks

    contexts = VerifiersTasks(SINGLE).contexts(1)
    engine = ScriptedEngine(tokenizer, lambda prompt: "blue " * 50)
    sampling = SamplingSpec(n=2, max_new_tokens=6)
    rubric = CombinedReward([VerifiersRubric(SINGLE)])
    [executed], _ = EpisodeRunner(engine, VerifiersAgentEnv, execute_cut_turns=True).run(contexts, sampling)
    out = rubric(executed)
    assert all(s.turns[0].finish_reason == "length" for s in executed)
    assert out.components["rubric.exact"].tolist() == [0.0, 0.0]  # the cut text is not the word
    text = executed[0].completion
    assert out.components["rubric.brevity"].tolist() == pytest.approx([-len(text) / 100] * 2)  # judged, as written
    [unseen], _ = EpisodeRunner(engine, VerifiersAgentEnv).run(contexts, sampling)
    assert all(s.info["finish_reason"] == "length" and s.artifacts["verifier"]["truncated"] for s in unseen)
    assert rubric(unseen).components["rubric.exact"].isnan().all()  # an empty completion: its function raised


def test_a_multi_turn_episode_follows_the_environment(verifiers):
    from propel.rewards import CombinedReward, VerifiersRubric
    from propel.tasks import VerifiersTasks

    context = VerifiersTasks(COUNTING).contexts(1)[0]
    done, env = _episode(context, "one", "two", "done")
    assert [(t.role, t.text) for t in done.turns] == [
        ("assistant", "one"),
        ("user", "again"),
        ("assistant", "two"),
        ("user", "again"),
        ("assistant", "done"),
        ("user", "bye"),  # the final message is shown, and ends the episode
    ]
    assert env.state.finish_reason == "submitted" and env.state.verifier["stop_condition"] == "has_final_env_response"
    capped, env = _episode(context, *["more"] * 9)
    assert env.state.finish_reason == "max_turns" and len(capped.assistant_texts) == 4  # propel's cap, below its 5
    out = CombinedReward([VerifiersRubric(COUNTING)])([done, capped])
    assert out.components["rubric.turns_said"].tolist() == [3.0, 4.0]  # read from the environment's state
    assert out.components["rubric.num_turns"].tolist() == [3.0, 4.0]


def test_an_environment_that_raises_fails_the_episode_as_infrastructure(verifiers):
    from propel.envs import VerifiersAgentEnv
    from propel.tasks import VerifiersTasks

    env = VerifiersAgentEnv()
    env.reset(VerifiersTasks(COUNTING).contexts(1)[0])
    with pytest.raises(RuntimeError, match="the environment broke"):  # the episode runner marks it infra_error
        env.step("fail")
    env.close()
