"""``shoal doctor``: checks an installation against a live cluster (and its Prometheus)
and says what is wrong and how to fix it.

``checks`` holds the pure checks (fetched objects in, findings out), ``probe`` the
reads, ``report`` the table and the JSON."""
