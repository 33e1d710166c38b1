"""What the probe reward reads: its default text source, and empty completions (scored, never a crash)."""

import pytest
import torch

from propel.probes.artifact import ProbeArtifact, ProbeScorer
from propel.probes.extraction import ActivationExtractor
from propel.probes.gate import GateSpec
from propel.probes.heads import ProbeHead
from propel.probes.sweep_spec import RVPSample
from propel.records import Sample
from propel.rewards import ProbeReward, RewardContext


def _probe_folder(model, tmp_path, reference):
    torch.manual_seed(0)
    head = ProbeHead("linear", model.config.hidden_size)
    return ProbeArtifact(head, reference, 2, "last_token").save(tmp_path / "probe")


def test_default_text_is_the_rendered_task_else_the_completion():
    seen: list[list[str]] = []

    def probe(texts):
        seen.append(list(texts))
        return torch.tensor([float(len(t)) for t in texts])

    samples = [
        Sample("PROMPT", "raw completion with <task> tags", info={"task_text": "Rendered task"}),
        Sample("PROMPT", "unparsed", valid=False),
        Sample("PROMPT", "no rendering"),
    ]
    rewards = ProbeReward(probe=probe, gate=GateSpec(mode="probe_only"))(samples)
    assert seen == [["Rendered task", "unparsed", "no rendering"]]
    assert rewards.tolist() == [13.0, 8.0, 12.0]
    ProbeReward(probe=probe, text="prompt+completion", gate=GateSpec(mode="probe_only"))(samples[:1])
    assert seen[-1] == ["PROMPTraw completion with <task> tags"]


@pytest.mark.parametrize("mode", ["probe_only", "hard_gate"])
def test_empty_completion_is_scored_by_a_real_probe(tiny_model, tiny_model_dir, tmp_path, mode):
    """First token EOS (or a stop string at once): the completion is "", and the training step goes on."""
    model, tok = tiny_model
    folder = _probe_folder(model, tmp_path, str(tiny_model_dir))
    reward = ProbeReward(artifact=str(folder), gate=GateSpec(mode=mode, floor=-5.0))
    reward.setup(RewardContext(policy=model, tokenizer=tok, model_name=str(tiny_model_dir)))
    samples = [Sample("p", "", valid=mode == "hard_gate"), Sample("p", "A task: add 2 and 3.")]
    got = reward(samples)
    want = ProbeScorer(ProbeArtifact.load(folder), model, tok).logits(["", "A task: add 2 and 3."])
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want)


def test_rvp_sample_of_unparsed_generations(tiny_model):
    """The probe stage's RVP sample encodes raw completions, some of them empty."""
    model, tok = tiny_model
    texts = ["", "Task: 2 + 2", "", "Task: prove it"]
    ex = ActivationExtractor(model, tok, [2], ["last_token"])
    valid = torch.tensor([False, True, False, True])
    sample = RVPSample(ex.encode(texts), valid, group_size=2, gate=GateSpec(mode="probe_only", floor=-1.0))
    torch.manual_seed(0)
    head = ProbeHead("linear", model.config.hidden_size)
    overall, within = sample.score("layer2/last_token", head)
    assert overall > 0 and within > 0
