"""The pool gateway at run time: applying a rendered configuration to a running HAProxy,
and the agent that does so whenever the pool's gateway ConfigMap changes."""
