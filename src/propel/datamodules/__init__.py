"""LightningDataModules: task pools, activations, rollout streams, trajectories (import from their modules)."""
