"""Small verifiers environments written for the adapter's unit tests (the real ones are in test_verifiers_grpo.py).

``load_environment``: single-turn, one word to say; its rubric has a sync function reading messages as dicts, an
async one reading them as objects, a penalty that cannot judge some replies (raises on ``boom``, None on ``skip``) and
a group function. ``load_counting``: multi-turn; the environment answers ``again`` until the model says ``done``,
then ends with a final message; its rubric reads what the environment kept in the state.
"""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

WORD = "blue"


def exact(completion, answer) -> float:
    return float(completion[-1]["content"].strip() == answer)


async def brevity(completion) -> float:
    return -len(completion[-1].content) / 100


def penalty(completion) -> float | None:
    text = completion[-1]["content"]
    if text == "boom":
        raise RuntimeError("cannot judge this reply")
    if text == "skip":
        return None
    return -1.0 if "!" in text else 0.0


def share(completions) -> list[float]:
    said = [c[-1]["content"] for c in completions]
    return [said.count(s) / len(said) for s in said]


def load_environment(rows: int = 3) -> vf.Environment:
    data = Dataset.from_list([{"question": f"Say the secret word ({i}).", "answer": WORD} for i in range(rows)])
    rubric = vf.Rubric(funcs=[exact, brevity, penalty, share], weights=[1.0, 0.5, 1.0, 0.0])
    return vf.SingleTurnEnv(dataset=data, rubric=rubric, system_prompt="Answer in one word.")


class CountingEnv(vf.MultiTurnEnv):
    async def setup_state(self, state):
        state["said"] = []
        return state

    async def env_response(self, messages, state, **kwargs):
        text = messages[-1]["content"]
        if text == "fail":
            raise RuntimeError("the environment broke")
        state["said"].append(text)
        if text == "done":
            state["final_env_response"] = [vf.UserMessage(content="bye")]
            return state["final_env_response"]
        return [vf.UserMessage(content="again")]


def turns_said(state) -> float:
    return float(len(state["said"]))


def load_counting(max_turns: int = 5) -> vf.Environment:
    data = Dataset.from_list([{"question": "Count with me.", "answer": ""}])
    return CountingEnv(dataset=data, rubric=vf.Rubric(funcs=[turns_said]), max_turns=max_turns)
