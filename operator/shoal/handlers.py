"""kopf handlers: thin glue between the watch events and the reconcilers."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from shoal import __version__

log = logging.getLogger(__name__)


@kopf.on.startup()
def announce(logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any) -> None:
    logger.info("shoal operator %s starting", __version__)


@kopf.on.probe(id="version")
def version_probe(**_: Any) -> str:
    """Reported by the liveness endpoint alongside kopf's own checks."""
    return __version__
