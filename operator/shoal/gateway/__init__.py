"""The gateway's process side: running and reloading HAProxy on rendered files.

Used by the gateway pod's agent and by the test harness (e2e/gateway.py). The
configuration itself is rendered by :func:`shoal.render.haproxy.haproxy_config`.
"""
