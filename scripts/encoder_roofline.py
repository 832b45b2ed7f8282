"""How close the encoder runs to this machine's matrix-multiply throughput: is there an encoder-side speedup left?

Encodes LoCoMo turns with the default encoder (ONNX Runtime, as `memwb bench` does) and counts the work it did:
each token passes six layers of four 384x384 and two 384x1536 weight matrices (2 FLOP per weight per token), and
attention adds 4 x 384 x n² per layer for a text of n tokens. That FLOP count over the best of `--repeat`
encodes is set beside float32 matrix products of the same shapes in numpy (all cores). A ratio near 1 means the
encoder is compute-bound at the machine's float32 rate: only fewer or shorter texts, or lower precision (vectors
that differ from torch's), make encoding faster. Prints the figures and writes them to out/encoder_roofline.json.

    python scripts/encoder_roofline.py [--texts 1500] [--repeat 2]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import timings, write_json  # noqa: E402

from engine.llm.embedder import load_encoder  # noqa: E402
from engine.llm.model_files import default_model_path  # noqa: E402
from engine.loaders import load_conversations  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"
LAYERS, HIDDEN, FFN = 6, 384, 1536          # all-MiniLM-L6-v2
WEIGHTS_PER_TOKEN = LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)


def best_of(fn, repeat: int) -> float:
    return min(timings(fn, repeat)[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--out", default=str(ROOT / "out" / "encoder_roofline.json"))
    args = ap.parse_args()
    texts = [t.text for conv in load_conversations(args.data) for t in conv.turns][:args.texts]
    encoder = load_encoder(default_model_path())
    lengths = [len(ids) for ids in encoder.token_ids(texts)] if hasattr(encoder, "token_ids") else None
    if lengths is None:
        print(f"the {encoder.name} encoder does not expose its token ids; run with MEMWB_ENCODER=onnx")
        return 2
    flop = 2 * WEIGHTS_PER_TOKEN * sum(lengths) + LAYERS * 4 * HIDDEN * sum(n * n for n in lengths)
    encoder.encode(texts[:32])
    seconds = best_of(lambda: encoder.encode(texts), args.repeat)
    rows = np.random.default_rng(0).random((4096, HIDDEN), dtype=np.float32)
    weights = np.random.default_rng(1).random((HIDDEN, FFN), dtype=np.float32)
    rows @ weights
    products = 20
    gemm = best_of(lambda: [rows @ weights for _ in range(products)], args.repeat)
    encoder_rate = flop / seconds / 1e9
    gemm_rate = 2 * 4096 * HIDDEN * FFN * products / gemm / 1e9
    figures = {"encoder": encoder.name, "texts": len(texts), "tokens": sum(lengths),
               "mean_tokens": round(sum(lengths) / len(texts), 1), "seconds": round(seconds, 3),
               "ms_per_text": round(seconds / len(texts) * 1e3, 3), "encoder_gflops": round(encoder_rate, 1),
               "numpy_sgemm_gflops": round(gemm_rate, 1), "ratio": round(encoder_rate / gemm_rate, 3)}
    print(f"{figures['texts']} LoCoMo turns, {figures['tokens']} tokens ({figures['mean_tokens']} a text): "
          f"{figures['seconds']} s with the {encoder.name} encoder ({figures['ms_per_text']} ms a text)")
    print(f"encoder {figures['encoder_gflops']} GFLOP/s against numpy float32 products of the same shapes "
          f"{figures['numpy_sgemm_gflops']} GFLOP/s: {figures['ratio']:.0%} of the machine's rate")
    write_json(args.out, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
