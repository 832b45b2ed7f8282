"""The encoder under ONNX Runtime (the default) against sentence-transformers on torch: speed and vector difference.

A measurement of the two ways to run the model (`MEMWB_ENCODER=torch|onnx` chooses the encoder,
engine/llm/onnx_encoder.py). Both embed the same LoCoMo turns: one query at a time (median over `--single`
calls) and all at once (torch in batches of 64, ONNX by token length). Prints the figures and writes
them to out/bench_onnx.json.

    python scripts/bench_onnx.py [--texts 512] [--single 100]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import timings, write_json  # noqa: E402

from engine.llm.embedder import Embedder, load_encoder  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"


def timed(fn, repeat: int) -> float:
    """Median milliseconds over `repeat` calls."""
    return round(statistics.median(timings(fn, repeat)[0]) * 1e3, 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--single", type=int, default=100)
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_onnx.json"))
    args = ap.parse_args()
    import onnxruntime

    path = Embedder(shared=None).model_path
    torch, onnx = load_encoder(path, "torch"), load_encoder(path, "onnx")
    texts = [t.raw for t in load_conversation(LOCOMO, "conv-26").turns][: args.texts]
    ref, got = torch.encode(texts), onnx.encode(texts)
    queries = texts[: args.single]
    result = {
        "onnxruntime": onnxruntime.__version__, "texts": len(texts),
        "max_abs_difference": float(np.abs(ref - got).max()),
        "single_ms": {"torch": timed(lambda: [torch.encode([q]) for q in queries], 1) / len(queries),
                      "onnx": timed(lambda: [onnx.encode([q]) for q in queries], 1) / len(queries)},
        "batched_ms_per_text": {"torch": timed(lambda: torch.encode(texts), 3) / len(texts),
                                "onnx": timed(lambda: onnx.encode(texts), 3) / len(texts)},
    }
    print(f"max |torch - onnx| over {len(texts)} vectors: {result['max_abs_difference']:.2e}")
    for name in ("single_ms", "batched_ms_per_text"):
        print(f"{name:20s} torch {result[name]['torch']:.3f}  onnx {result[name]['onnx']:.3f}")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
