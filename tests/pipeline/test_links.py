"""The links table: the values the pipeline keeps in step are data (``propel.pipeline.links.LINKS``), applied by one
function; one token budget, sampler and group size reach every stage that samples; a stage key that disagrees with
a link is refused, naming the link."""

from __future__ import annotations

import pytest

from propel.errors import ConfigError
from propel.pipeline.config import ALL_STAGES
from propel.pipeline.links import LINKS, RUN_VALUES, given_keys, stage_links
from propel.pipeline.stage_configs import load_pipeline_config

ORDER = ["label", "grpo", "warm_start", "gate_arm", "probe", "evaluate", "aux_probe", "constrained", "auxiliary"]
"""The order the stages are composed in: a link reads only a stage composed before its target."""


def test_every_link_reads_a_known_value_or_an_earlier_stage():
    for link in LINKS:
        assert link.stage in ALL_STAGES, link
        if link.source.startswith("run."):
            assert link.source.removeprefix("run.").split("/")[0] in RUN_VALUES, link
        elif not link.source.startswith("="):
            source = link.source.split(".")[0]
            assert ORDER.index(source) < ORDER.index(link.stage), link
    # the co-evolution's runs take their kind's rows, their own rows first
    constrained = {link.key: link.source for link in stage_links("constrained")}
    assert constrained["model.init_args.rewards[ProbeReward].constraint"] == "run.workdir/aux_probe/artifact"
    assert constrained["model.init_args.max_new_tokens"] == "run.max_new_tokens"
    assert {link.key: link.source for link in stage_links("aux_probe")}["pool"] == "run.workdir/aux_pool/pool"


def test_section_keys_in_the_links_syntax():
    section = {"config": ["x.yaml"], "model.init_args.lr": 1, "data": {"init_args": {"n": 2}},
               "callbacks": {"ModelCheckpoint": {"dirpath": "d"}}}  # fmt: skip
    assert given_keys(section) == {
        "model.init_args.lr": 1,
        "data.init_args.n": 2,
        "trainer.callbacks[ModelCheckpoint].dirpath": "d",
    }


def test_one_token_budget_sampler_and_group_size_reach_every_stage_that_samples(tmp_path):
    cfg = load_pipeline_config(
        "configs/demo.yaml",
        [f"workdir={tmp_path}", "sampling.max_new_tokens=32", "sampling.temperature=0.7", "sampling.group_size=3",
         "grpo.model.init_args.group_size=3"],  # a stage key that agrees with its link is fine
    )  # fmt: skip
    label, probe, grpo, evaluate = (cfg.configs[k] for k in ("label", "probe", "grpo", "evaluate"))
    for args in (label["model"]["init_args"], evaluate["model"]["init_args"]):
        assert args["max_new_tokens"] == 32 and args["temperature"] == 0.7
    assert grpo["model"]["init_args"]["max_new_tokens"] == probe["rvp"]["max_new_tokens"] == 32
    assert grpo["model"]["init_args"]["temperature"] == probe["rvp"]["temperature"] == 0.7
    assert grpo["model"]["init_args"]["group_size"] == probe["rvp"]["group_size"] == 3
    applied = {row["target"]: row for row in cfg.links}
    assert applied["grpo.model.init_args.max_new_tokens"]["value"] == 32
    assert applied["probe.rvp.group_size"]["source"] == "run.group_size"
    assert applied["grpo.trainer.callbacks[ModelCheckpoint].dirpath"]["value"] == str(tmp_path / "grpo" / "checkpoints")


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "grpo.model.init_args.max_new_tokens=48",
            r"'grpo.model.init_args.max_new_tokens': 48 disagrees with the link "
            r"run.max_new_tokens -> grpo.model.init_args.max_new_tokens .*sets 64.*sampling.max_new_tokens",
        ),
        ("probe.rvp.group_size=5", r"'probe.rvp.group_size': 5 disagrees with the link run.group_size"),
        ("grpo.callbacks.ModelCheckpoint.dirpath=elsewhere", r"'grpo.trainer.callbacks\[ModelCheckpoint\].dirpath'"),
    ],
)
def test_a_stage_key_that_disagrees_with_a_link_is_refused(tmp_path, override, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        load_pipeline_config("configs/demo.yaml", [f"workdir={tmp_path}", override])
    assert "\n" not in str(err.value)


def test_the_demo_is_the_full_demo_at_half_size(tmp_path):
    """``make demo`` (configs/demo.yaml) runs the full demo's pipeline (configs/demo_full.yaml, the committed run's
    setting) and differs from it only in sizes, the warm start's lr, the KL anchor and when callbacks fire: the same
    stages, model, domain, probe sweep, rewards and evaluation otherwise, so its report reads like the full one's."""
    from dataclasses import asdict

    from propel.cli.resume import flat_keys
    from propel.losses.policy_gradient import LossSpec

    half, full = (
        load_pipeline_config(f"configs/{name}.yaml", [f"workdir={tmp_path}"]) for name in ("demo", "demo_full")
    )
    for cfg in (half, full):  # a loss left at its default is the default spec, spelled out
        for stage in cfg.stages:
            args = cfg.configs[stage].get("model", {}).get("init_args", {})
            if "loss" in args:
                args["loss"] = asdict(LossSpec(**(args["loss"] or {})))
    assert half.stages == full.stages
    sizes = ("max_steps", "n_tasks", "batch_size", "every_n_train_steps", "every_n_steps", "max_steps_without_update")
    differing = set()
    for stage in full.stages:
        a, b = flat_keys(half.configs[stage]), flat_keys(full.configs[stage])
        assert a.keys() == b.keys(), stage
        differing |= {f"{stage}:{key}" for key in a if a[key] != b[key]}
    unexplained = {
        d for d in differing
        if not d.endswith(sizes) and not d.endswith(("loss.beta", "warm_start:model.init_args.lr"))
    }  # fmt: skip
    assert not unexplained, sorted(unexplained)
    assert {"warm_start:model.init_args.loss.beta", "grpo:model.init_args.loss.beta"} <= differing
    assert half.configs["warm_start"]["trainer"]["max_steps"] * 2 == full.configs["warm_start"]["trainer"]["max_steps"]
