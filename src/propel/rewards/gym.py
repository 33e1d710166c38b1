"""reasoning-gym's own verifier as a reward: the dataset's ``score_answer`` on the answer extracted from the completion.

Contexts come from ``propel.tasks.ReasoningGymTasks`` (``data``: the dataset's name and config, the item's question,
oracle answer and metadata, the answer's tag). The answer is the last ``<answer>...</answer>`` of the completion,
stripped (the whole stripped completion when the contexts' tag is None; no tagged answer scores 0). Each dataset
scores it its own way: exact match 1.0 by default, ``len(oracle) / len(answer)`` when the answer only contains the
oracle, numeric, set or partial-credit comparisons where a dataset defines them. Each dataset's mean is logged as its
own series, ``train/reward/<name>/<dataset>/mean`` (over that dataset's samples of the step, with their count as
``.../n``), and ``sample.info["gym"]`` records the dataset, the extracted answer, the oracle and the score for the
sample table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch

from propel.records import Sample
from propel.rewards.reward import Reward, gold_data
from propel.tasks.gym import answer_tag, extract_answer, gym_dataset

INFO_KEY = "gym"
DATA_KEYS = ("dataset", "question", "answer")


def gym_score(data: dict, answer: str | None) -> float:
    """The context's dataset's ``score_answer`` of ``answer`` against its item (0 for no answer)."""
    if answer is None:
        return 0.0
    entry = {"question": data["question"], "answer": data["answer"], "metadata": data.get("metadata", {})}
    return float(gym_dataset(data["dataset"], data.get("config")).score_answer(answer, entry))


class ReasoningGymReward(Reward):
    """``score_answer`` of each sample's dataset on its extracted answer, in [0, 1].

    Args:
        name: the component's name (the per-dataset series are logged under it).
        weight: weight in a ``CombinedReward``.
    """

    def __init__(self, name: str = "gym", weight: float = 1.0) -> None:
        self.name, self.weight = name, weight
        self._step: dict[str, list[float]] = {}

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        values, by_dataset = [], defaultdict(list)
        for i, s in enumerate(samples):
            data = gold_data(s, i, DATA_KEYS, "ReasoningGymReward", "propel.tasks.ReasoningGymTasks contexts")
            answer = extract_answer(s.completion, answer_tag(data))
            score = gym_score(data, answer)
            s.info[INFO_KEY] = {"dataset": data["dataset"], "answer": answer, "oracle": data["answer"], "score": score}
            by_dataset[data["dataset"]].append(score)
            values.append(score)
        self._step = dict(by_dataset)
        return torch.tensor(values, dtype=torch.float32)

    def step_stats(self) -> dict[str, float]:
        """Each dataset's mean score and sample count in the latest call (``<dataset>/mean``, ``<dataset>/n``)."""
        out = {}
        for dataset, scores in sorted(self._step.items()):
            out[f"{dataset}/mean"] = sum(scores) / len(scores)
            out[f"{dataset}/n"] = float(len(scores))
        return out
