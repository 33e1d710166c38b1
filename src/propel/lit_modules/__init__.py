"""LightningModules and the parts they share (import from their modules):

- ``lora_policy``: ``LoRAPolicyModule``, the LoRA policy base of RL and distillation trainers (all but the loss).
- ``grpo``: ``GRPOModule``, GRPO on a LoRA policy: G completions per context, PPO-style clipped optimizer steps.
- ``grpo_turn_kl``: ``GRPOTurnKLModule``, GRPO plus the turn-targeted KL term, in one optimizer step.
- ``distill``: ``TurnKLDistillModule``, turn-targeted KL distillation toward the policy-with-a-hint.
- ``turn_kl``: ``TurnKLSpec`` and ``TurnKLTerm``, the turn-targeted KL term those two share (a collaborator).
- ``turn_kl_loss``: ``TurnKLLoss``, that term as a loss term of a step (``loss_terms``).
- ``labeling``: ``LabelingModule``, solver labeling as a predict job: generate, check validity, solver trials, grade.
- ``evaluation``: ``EvaluationModule``, ``propel test``: fresh tasks from a policy, solver trials, utility, diversity.
- ``probe``: ``ProbeModule``, a small head on frozen-reference activations predicting the utility band.
- ``async_rollouts``: ``AsyncRollouts``, the next batches sampled on a worker thread, ``max_staleness`` steps at most.
- ``ranks``: ``Ranks``, the data-parallel reductions that make every rank take the same decision.
- ``state``: ``RolloutState``, what one RL step produced, published for callbacks.
- ``phases``: ``Phases``, where a module is inside its step (rollouts, grading, update), for the progress display.
- ``update_guard``: ``UpdateGuard``, steps without an optimizer step: counted, warned about, stopped after too many.
"""
