"""LightningDataModules (import from their modules):

- ``stream``: ``ContextStreamDataModule``, the resumable, seeded stream of task batches online RL datamodules share.
- ``contexts``: ``SingleTurnDataModule`` (completions scored by one ``Scorer``); ``ContextDataModule``, generator tasks.
- ``code_solutions``: ``CodeSolutionDataModule`` and ``CodeSolutionScorer``, coding tasks graded by ``TestSuiteReward``.
- ``gym``: ``ReasoningGymDataModule`` and ``GymAnswerScorer``, reasoning-gym questions and their answers.
- ``triage``: ``TriageDataModule`` and ``TriageScorer``, IT-triage tickets answered with one ``submit_resolution``.
- ``agent_episodes``: ``EpisodeDataModule``, multi-turn agent episodes run by an ``EpisodeRunner`` in a sandbox.
- ``task_pool``: ``TaskPoolDataModule``, generator contexts for labeling (``propel predict``) and ``propel test``.
- ``activations``: ``ActivationDataModule``, cached reference-model features joined with pool labels (probe training).
"""
