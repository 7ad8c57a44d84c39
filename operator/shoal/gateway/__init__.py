"""The pool gateway: its signing keys, its configuration and the agent that reloads it."""
