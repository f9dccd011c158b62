"""Regenerate the committed gRPC stubs in leteo_fed/proto/ from protos/.

The stubs are committed (not generated at install time) so a deployment needs no compiler;
tests/leteo_fed/transport/test_protos_fresh.py fails if they drift from protos/.
Usage: python scripts/gen_protos.py [OUTPUT_DIR]
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[1]
PROTO = "leteo/v1/leteo.proto"
STUBS = ("leteo_pb2.py", "leteo_pb2.pyi", "leteo_pb2_grpc.py")


def generate(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{ROOT / 'protos'}",
                f"--python_out={tmp}",
                f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}",
                str(ROOT / "protos" / PROTO),
            ]
        )
        if code != 0:
            raise SystemExit(f"protoc failed with exit code {code}")
        written = []
        for name in STUBS:
            text = (Path(tmp) / "leteo" / "v1" / name).read_text()
            # The generated gRPC module imports by proto path; make it a package-relative import.
            text = re.sub(r"^from leteo\.v1 import", "from . import", text, flags=re.M)
            target = out_dir / name
            target.write_text(text)
            written.append(target)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "leteo_fed" / "proto"
    for path in generate(out):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
