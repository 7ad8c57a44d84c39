"""Reconcilers: read the world, render the desired objects, converge, report status."""
