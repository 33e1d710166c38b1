"""Callbacks: RVP selection, collapse detection, adversarial probe mining, pool writing."""
