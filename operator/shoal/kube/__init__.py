"""The operator's one edge to the Kubernetes API: apply, read, status, Events."""
