"""Starting the kopf operator with deliberate settings.

kopf's defaults store handler progress and the last-handled spec in annotations on the
watched objects. Those annotations make a GitOps-synced object look drifted and are
copied along when the object is backed up and restored, so Shoal keeps both in its
status instead, under its own prefix and finalizer name.
"""

from __future__ import annotations

import logging

import kopf

from shoal.settings import GROUP, Settings


def operator_settings(config: Settings) -> kopf.OperatorSettings:
    """The kopf settings Shoal runs with (pure: builds and returns an object)."""
    settings = kopf.OperatorSettings()
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf.progress")
    settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage(
        field="status.kopf.lastHandledConfiguration"
    )
    # A watch that silently stalls is a known failure mode: bound every watch request
    # so it is re-established even when the server never closes it.
    settings.watching.server_timeout = config.watch_server_timeout
    settings.watching.client_timeout = config.watch_client_timeout
    settings.watching.connect_timeout = 30
    settings.posting.level = logging.INFO
    # Reconcilers are synchronous and run in this pool; a small default pool lets a
    # burst of child events delay everything else.
    settings.execution.max_workers = config.workers
    # One active replica (Recreate strategy); no peering objects to install or clean.
    settings.peering.standalone = True
    return settings


def run(config: Settings) -> None:
    """Run the operator until it is told to stop (blocking)."""
    import shoal.handlers  # noqa: F401  - registers the handlers with kopf

    kopf.configure(verbose=config.verbose, log_prefix=True)
    kopf.run(
        settings=operator_settings(config),
        standalone=True,
        clusterwide=not config.namespaces,
        namespaces=config.namespaces,
        liveness_endpoint=config.liveness_endpoint,
    )
