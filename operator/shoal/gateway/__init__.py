"""The pool gateway at run time: the cluster's signing keys it verifies tokens with,
applying a rendered configuration to a running HAProxy, and the agent that does so
whenever the pool's gateway ConfigMap changes."""
