"""The chaos suite: faults a production control plane sees, on a real local cluster."""
