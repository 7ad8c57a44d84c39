"""The custom resources: pydantic models, the single source of the CRDs, and the
conditions their status carries."""
