"""propel's triage environment in TRL's ``GRPOTrainer(environment_factory=...)``: TRL 1.16's own trainer builds the
tool from ``TriageToolEnv``, resets one instance per rollout with a ticket, reads the reward from ``get_reward`` and
takes a training step with a tiny model; the tool, called as TRL calls it, grades with propel's six rewards (a random
model writes no tool call, so the step's rewards are all 0 and the call is checked on the environment directly)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(400)


def test_one_grpo_trainer_step_with_the_triage_environment(require, tiny_model_dir, tokenizer, tmp_path, monkeypatch):
    require("openenv.core")
    trl = require("trl")
    from transformers.utils import get_json_schema
    from trl.chat_template_utils import qwen2_5_chat_template

    from propel.served.trl_triage import TriageToolEnv

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tok = tokenizer.__class__.from_pretrained(str(tiny_model_dir))
    tok.chat_template = qwen2_5_chat_template  # a tool-calling template TRL parses (SmolLM2's ignores tools)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=str(tiny_model_dir), args=args, processing_class=tok, environment_factory=TriageToolEnv
    )
    assert [t.__name__ for t in trainer.tools] == ["submit_resolution"]
    trainer.train()
    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    # the environment's reward column, read through get_reward: a random model calls no tool, so no submission and 0
    assert logged["rewards/TriageToolEnv/mean"] == 0.0 and logged["tools/call_frequency"] == 0.0 and "loss" in logged
    pool = trainer._environment_pool[None]
    assert len(pool) == 2 and all(env._session.env.ticket is not None for env in pool)  # one ticket per rollout

    schema = get_json_schema(TriageToolEnv.submit_resolution)["function"]  # what TRL shows the model
    props = schema["parameters"]["properties"]
    assert {k: v["type"] for k, v in props.items()} == {
        "resolution": "string",
        "citations": "array",
        "confidence": "number",
        "escalate": "boolean",
    }
    env = pool[0]
    prompt = env.reset(ticket_id="T0001")
    ticket = env._session.env.ticket
    assert "Ticket T0001" in prompt and "calling submit_resolution" in prompt
    feedback = env.submit_resolution(ticket.gold_resolution, list(ticket.gold_ids), 0.9, ticket.escalate)
    assert feedback.startswith("graded 5.99") and env.get_reward() == pytest.approx(5.99, abs=1e-6)
    assert env.submit_resolution("again", [], 0.1, False).startswith("error: this ticket already")
    env.reset(ticket_id="T0001")
    assert env.submit_resolution("x", [], "high", False).startswith("error: invalid_action: confidence")
    assert env.get_reward() == 0.0
