"""Callbacks (import from their modules):

- ``adapters``: ``AdapterSaver``, the policy's LoRA adapter saved in peft format every N steps.
- ``adversarial``: ``AdversarialProbeMining``, the probe's false positives found with real solver trials.
- ``collapse``: ``CollapseDetector``, mode collapse during RL: Self-BLEU up, Distinct-n down, one topic taking over.
- ``held_out_rewards``: ``HeldOutRewards``, every reward component on a fixed held-out task set at checkpoints.
- ``last_checkpoint``: ``LastCheckpoint``, the run folder's ``last.ckpt`` written on a stop (signal) and at the end.
- ``progress``: ``StepProgress``, steps of ``max_steps`` and the phase inside a step (the module's ``Phases``): a Rich
  bar in a terminal, a plain line per step (reward, components, seconds) without one; ``propel`` adds it to every run.
- ``pool_writer``: ``PoolWriter``, labeled tasks written to a Parquet pool as they are produced, then summarized.
- ``reward_curves``: ``RewardCurves``, per-component reward curves and the first-vs-last window table.
- ``reward_floor``: ``RewardFloorCheck``, valid samples checked to sit above the invalid floor during GRPO.
- ``run_summary``: ``RunSummary``, chosen logged metrics per step, written with the first-vs-last window table and a
  figure (``summary.md``, ``summary.json``, ``summary.png``) at the end of fitting.
- ``rvp``: ``RVPSelection``, reward variance under the base policy, to pick a probe and check it before RL.
- ``samples``: ``SampleTable``, a W&B table of the sampled tasks with their rewards.
- ``trajectories``: ``TrajectoryWriter``, every step's rollouts kept on disk as Parquet.
"""
