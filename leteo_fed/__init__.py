"""LETEO-Fed: privacy-preserving analytics across many data owners."""

import os as _os

# Our processes only fork to exec (Spark's JVM launcher); gRPC's fork handlers are then not
# needed and can abort the child while server threads run. Must be set before grpc is imported.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__version__ = "0.1.0"
