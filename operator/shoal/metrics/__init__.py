"""The metrics pipeline Shoal ships: Prometheus recording rules, prometheus-adapter
rules, and reading a model's figures back for its status."""
