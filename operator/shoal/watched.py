"""Every kind the operator watches, and how its watch is filtered on the server.

The custom kinds and Namespaces are watched whole. The children are watched only as far
as a label selector the API server applies: the objects Shoal created (its managed-by
label), the EndpointSlices of its models' Services (which carry the Service's labels),
and its gateways' pods. Which kinds, and each one's selector, is the table of kinds'
(shoal.api.kinds).
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.api.kinds import watched


@dataclass(frozen=True)
class Watched:
    group: str
    version: str
    plural: str
    kind: str
    # The API server's label selector for the watch; "" watches every object.
    selector: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_ALL = tuple(Watched(k.group, k.version, k.plural, k.kind, k.watch or "") for k in watched())
# Indexed: the cache holds all of them before any pass runs (see shoal.handlers): the
# kinds watched whole.
INDEXED = tuple(w for w in _ALL if not w.selector)
# The children, and the EndpointSlices and pods of Shoal's: watched through a selector.
CHILDREN = tuple(w for w in _ALL if w.selector)
