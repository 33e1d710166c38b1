"""LightningModules: ProbeModule, GRPOModule, TurnKLDistillModule, LabelingModule (import from their modules)."""
