"""Pure renderers: validated custom resources in, desired Kubernetes objects out (dicts).

Nothing here performs I/O; the reconcilers apply what these functions return.
"""
