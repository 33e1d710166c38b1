"""propel's environments as OpenEnv environments: IT triage (the six triage rewards as an OpenEnv rubric) and
HumanEval (the test-suite reward, graded by value out of process), usable in-process, served over OpenEnv's server
(``propel serve-env <name>``) and from TRL's ``GRPOTrainer(environment_factory=...)``.

It sits above ``rewards`` (its environments score with propel's rewards) and needs ``openenv-core`` (the ``openenv``
extra); nothing is imported here, so ``propel --help`` stays light.
"""
