"""RVP, the probe selection's tiebreak, reads the reward variance of the policy GRPO starts from: with a warm start
before the probe stage that is the warm start's adapter, not the base generator (whose tasks are mostly invalid)."""

from __future__ import annotations

import json

import pytest
import torch

from propel.domains import MathExpressionDomain
from propel.errors import ConfigError
from propel.jobs.probe_job import ProbeJob, RVPSpec
from propel.pipeline.outputs import with_outputs
from propel.pipeline.stage_configs import load_pipeline_config
from propel.pipeline.stages import stage_config

FIRST = ("stages=[warm_start,label,probe,grpo,evaluate]", "warm_start.trainer.max_steps=2", "grpo.trainer.max_steps=3")
AFTER = ("stages=[label,probe,warm_start,grpo,evaluate]",) + FIRST[1:]


def _job(tmp_path, tiny_model_dir, adapter=None) -> ProbeJob:
    return ProbeJob(
        pool=str(tmp_path / "pool"),
        domain=MathExpressionDomain(),
        output_dir=str(tmp_path / "probe"),
        reference_model=str(tiny_model_dir),
        layers=[1],
        poolings=["mean_full"],
        rvp=RVPSpec(contexts=2, group_size=3, max_new_tokens=12, adapter=adapter),
    )


def _adapter(tiny_model_dir, path):
    """A LoRA adapter that changes what the tiny model samples (B is zero at init: given weights here)."""
    from propel.models import LoRASpec, apply_lora, load_model

    model, _ = load_model(str(tiny_model_dir))
    policy = apply_lora(model, LoRASpec(r=4, alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 2.0)
    policy.save_pretrained(str(path))
    return str(path)


def test_the_rvp_sample_comes_from_the_adapter_and_the_reference_stays_frozen(tmp_path, tiny_model_dir):
    from propel.models import freeze, load_model

    reference, tokenizer = load_model(str(tiny_model_dir))
    freeze(reference)
    weights = {k: v.clone() for k, v in reference.state_dict().items()}
    base = _job(tmp_path, tiny_model_dir).rvp_texts(reference, tokenizer)
    assert base == _job(tmp_path, tiny_model_dir).rvp_texts(reference, tokenizer)  # a fixed sample
    job = _job(tmp_path, tiny_model_dir, adapter=_adapter(tiny_model_dir, tmp_path / "adapter"))
    texts, valid = job.rvp_texts(reference, tokenizer)
    assert len(texts) == len(valid) == 2 * 3
    assert texts != base[0]  # another policy's sample
    assert (texts, valid) == job.rvp_texts(reference, tokenizer)
    assert not hasattr(reference, "peft_config")  # the probes still read the reference without the adapter
    assert all(torch.equal(v, weights[k]) for k, v in reference.state_dict().items())


def test_an_rvp_adapter_that_does_not_exist_is_refused_by_name(tmp_path, tiny_model_dir):
    with pytest.raises(ConfigError, match=r"probe rvp.adapter: '.*nowhere' does not exist"):
        _job(tmp_path, tiny_model_dir, adapter=str(tmp_path / "nowhere"))


def test_the_pipeline_gives_the_probe_stage_the_warm_starts_adapter_when_it_runs_after_it(tmp_path):
    first = load_pipeline_config(None, [f"workdir={tmp_path / 'a'}", *FIRST])
    with pytest.raises(ConfigError, match=r"the probe stage takes the warm_start stage's adapter \(the RVP sample"):
        with_outputs(first, "probe")
    warm = first.root / "warm_start"
    warm.mkdir(parents=True)
    (warm / "summary.json").write_text(json.dumps({"adapter": str(warm / "adapters" / "step-2")}))
    assert with_outputs(first, "probe")["rvp"]["adapter"] == str(warm / "adapters" / "step-2")
    assert stage_config(first, "probe")[1]["rvp"]["adapter"] == str(warm / "adapters" / "step-2")
    assert first.configs["probe"]["rvp"].get("adapter") is None  # the composed config is left as it was
    # no RVP sample: nothing to draw, nothing to wait for
    none = load_pipeline_config(None, [f"workdir={tmp_path / 'b'}", *FIRST, "probe.rvp.contexts=0"])
    assert with_outputs(none, "probe")["rvp"].get("adapter") is None
    # the probe before the warm start: the base generator is the policy GRPO's first stage starts from
    after = load_pipeline_config(None, [f"workdir={tmp_path / 'c'}", *AFTER])
    assert with_outputs(after, "probe")["rvp"].get("adapter") is None
