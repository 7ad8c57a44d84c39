"""Autoscaling decisions that need more than the HPA's own arithmetic (pure code)."""
