"""The sentence encoder under ONNX Runtime: MiniLM's transformer exported once from the packaged weights.

The default encoder (`MEMWB_ENCODER=torch` chooses the reference: `engine.llm.embedder`). ONNX Runtime
encodes conv-26's turns in about a quarter of torch's CPU time here, needs no torch import at run time, and
its vectors do not depend on how texts are batched: a text alone, padded beside a longer one, or among
others of its exact length gives the same float32 vector bit for bit (`tests/test_encoder.py`). So any
engine, task or process may encode a text in any batch and get the vector every other one gets.
Torch's sentence-transformers gives vectors within 2e-7 of these (its own vectors move by as much when the
batch around a text changes); the tests hold the two encoders to 1e-6.

The export (`export`) runs torch once on the packaged weights, never a download: `scripts/install.sh` does
it into the environment (`<prefix>/share/memory-workbench/onnx/`); a process that finds no exported file
there exports into the workspace's `models/` folder on first use, and says so on stderr (a logged warning);
`Embedder.encoder_description()` names the encoder in use, which `memwb replay` prints. The file is named by the weights' digest,
so other weights never read a stale export.

An int8 variant (`MEMWB_ENCODER=onnx-int8`, `OnnxEncoder(precision="int8")`) is that float export quantised by
ONNX Runtime's own `quantize_dynamic`: the 36 weight matrix products' weights as signed int8, one scale per output
channel, activations quantised per call (`quantize`). It is built beside the float export, at install time or on
first use (said on stderr, as the export is). Its vectors have a mean cosine of 0.9925 to float32's (min 0.965)
on 1,500 LoCoMo turns; the recipe (signed, per-channel, the word-embedding table left in float32) was the most
faithful of those tried at int8 speed, and its figures beside float32's are in `docs/ENCODER_INT8.md`.
Tokenization is the model's own `tokenizer.json` truncated at
the model's `max_seq_length`, as sentence-transformers does; pooling is the mean over real tokens, then
unit length.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import warnings
from pathlib import Path

import numpy as np

from engine.core.errors import WorkbenchError

BATCH = 64                  # texts per model call: texts of one token length at a time, so nothing is padded
THREADS_ENV = "MEMWB_ENCODER_THREADS"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
PRECISIONS = ("float32", "int8")
INT8_RECIPE = "int8pc"      # names the quantised file: signed weights per output channel, matrix products only
_LOCK = threading.Lock()
_log = logging.getLogger(__name__)      # unconfigured, a warning reaches stderr: a first-use export is never silent


class EncoderError(WorkbenchError):
    """The model cannot be run under ONNX Runtime (not installed, or a pooling this encoder does not do)."""


def installed_dir() -> Path:
    """Where `scripts/install.sh` puts exported models: inside the Python environment."""
    return Path(sys.prefix) / "share" / "memory-workbench" / "onnx"


def workspace_models_dir() -> Path:
    from engine.store.workspace import workspace_dir

    return workspace_dir() / "models"


def weights_digest(model_path: str | Path) -> str:
    """sha256 of the model's weights and configuration (the first 16 hex digits): names its export."""
    folder = Path(model_path)
    h = hashlib.sha256()
    for name in ("config.json", "sentence_bert_config.json", "model.safetensors", "pytorch_model.bin"):
        path = folder / name
        if path.is_file():
            h.update(name.encode())
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def export_name(model_path: str | Path, precision: str = "float32") -> str:
    suffix = f"-{INT8_RECIPE}" if _checked(precision) == "int8" else ""
    return f"{Path(model_path).name or 'model'}-{weights_digest(model_path)}{suffix}.onnx"


def _checked(precision: str) -> str:
    if precision not in PRECISIONS:
        raise EncoderError(f"precision {precision!r}: choose {', '.join(PRECISIONS)}")
    return precision


def find_export(model_path: str | Path, precision: str = "float32") -> Path | None:
    """The exported file for these weights (float32, or int8 quantised), installed or in the workspace, if one
    exists."""
    name = export_name(model_path, precision)
    for folder in (installed_dir(), workspace_models_dir()):
        if (folder / name).is_file():
            return folder / name
    return None


def check_supported(model_path: str | Path) -> None:
    """Mean pooling then normalisation is what this encoder computes; refuse anything else."""
    folder = Path(model_path)
    pooling = folder / "1_Pooling" / "config.json"
    modules = folder / "modules.json"
    if not folder.is_dir() or not pooling.is_file() or not modules.is_file():
        raise EncoderError(f"{model_path} is not a sentence-transformers model folder with a pooling module")
    conf = json.loads(pooling.read_text())
    others = [k for k, v in conf.items() if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"]
    if not conf.get("pooling_mode_mean_tokens") or others:
        raise EncoderError(f"{model_path} pools by {', '.join(others) or 'no mean'}; the ONNX encoder does mean "
                           "pooling only")
    if not any("Normalize" in m.get("type", "") for m in json.loads(modules.read_text())):
        raise EncoderError(f"{model_path} does not normalise its vectors; the ONNX encoder always does")


def export(model_path: str | Path, folder: str | Path) -> Path:
    """Export the model's transformer (token ids -> last hidden state) to `folder`; returns the file.

    Written to a temporary name and renamed, so a reader never sees half a file."""
    check_supported(model_path)
    import torch
    from sentence_transformers import SentenceTransformer

    target = Path(folder) / export_name(model_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    model = SentenceTransformer(str(model_path), device="cpu")
    bert = model[0].auto_model.eval()

    class Hidden(torch.nn.Module):          # keyword arguments: BertModel.forward's positions vary by version
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    sample = model.tokenizer(["an example sentence", "and a second, longer example sentence"], padding=True,
                             return_tensors="pt")
    axes = {n: {0: "batch", 1: "tokens"} for n in _INPUTS} | {"last_hidden_state": {0: "batch", 1: "tokens"}}
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the tracer's notes on BERT's Python branches
        torch.onnx.export(Hidden(), tuple(sample[n] for n in _INPUTS), str(partial), input_names=list(_INPUTS),
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False)
    partial.replace(target)
    return target


def quantize(model_path: str | Path, float_path: str | Path, folder: str | Path) -> Path:
    """The int8 variant of the float export at `float_path`, written to `folder` (temporary name, then renamed).

    Only the matrix products are quantised: the word-embedding table stays float32, since quantising that
    lookup cost agreement with float32 and no time."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = Path(folder) / export_name(model_path, "int8")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    handlers, level = logging.root.handlers[:], logging.root.level
    logging.disable(logging.WARNING)            # its advice to pre-process the graph: measured, no change here
    try:
        quantize_dynamic(str(float_path), str(partial), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
    finally:
        logging.disable(logging.NOTSET)
        logging.root.handlers[:], logging.root.level = handlers, level     # it configures the root logger
    partial.replace(target)
    return target


def build(model_path: str | Path, folder: str | Path, precision: str = "float32") -> Path:
    """The file for `precision` in `folder`, made if missing: the float export, and for int8 its quantisation
    (from the float export found anywhere, else one made in `folder` too)."""
    existing = Path(folder) / export_name(model_path, precision)
    if existing.is_file():
        return existing
    if precision == "float32":
        return export(model_path, folder)
    return quantize(model_path, find_export(model_path) or build(model_path, folder), folder)


def threads() -> int:
    value = os.environ.get(THREADS_ENV)
    if value is None:
        return max(1, min(os.cpu_count() or 1, 4))
    try:
        return max(1, int(value))
    except ValueError:
        raise EncoderError(f"{THREADS_ENV}={value!r} is not a number of threads") from None


class OnnxEncoder:
    """`encode(texts)` -> unit float32 vectors, one text's vector independent of the others encoded with it."""

    def __init__(self, model_path: str | Path, onnx_path: str | Path | None = None, precision: str = "float32"):
        try:
            import onnxruntime
        except ImportError:
            raise EncoderError("onnxruntime is not installed (pip install onnxruntime onnx)") from None
        from tokenizers import Tokenizer

        check_supported(model_path)
        self.precision = _checked(precision)
        self.name = "onnx" if precision == "float32" else f"onnx-{precision}"
        folder = Path(model_path)
        path = Path(onnx_path) if onnx_path else find_export(folder, precision)
        if path is None:
            with _LOCK:
                path = find_export(folder, precision)
                if path is None:
                    what = "export" if precision == "float32" else f"{precision} export"
                    _log.warning("no ONNX %s of the sentence encoder in this environment (%s; scripts/install.sh "
                                 "makes one): exporting it once from the packaged weights into %s", what,
                                 installed_dir(), workspace_models_dir())
                    path = build(folder, workspace_models_dir(), precision)
                    _log.warning("sentence encoder: ONNX Runtime (%s), exported to %s", precision, path)
        max_len = json.loads((folder / "sentence_bert_config.json").read_text()).get("max_seq_length", 256) \
            if (folder / "sentence_bert_config.json").is_file() else 256
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_len)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads()
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")   # a shared machine: no busy-wait
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.path = path
        self.per_call = BATCH if precision == "float32" else 1
        self.dim = int(self.session.get_outputs()[0].shape[-1]) if isinstance(
            self.session.get_outputs()[0].shape[-1], int) else 384

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Texts grouped by exact token length (at most `BATCH` a call), so no call pads anything.

        The int8 model runs one text a call: its activations are quantised with one scale per call, so in a
        batch a text's vector would depend on its neighbours (measured: cosine 0.985 between a LoCoMo turn's
        vector alone and in a batch of 64), and two processes could cache two vectors of one text."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(texts)
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(ids):
            groups.setdefault(len(row), []).append(i)
        for length in sorted(groups):
            members = groups[length]
            for start in range(0, len(members), self.per_call):
                chunk = members[start:start + self.per_call]
                input_ids = np.array([ids[i] for i in chunk], dtype=np.int64)
                feeds = {"input_ids": input_ids, "attention_mask": np.ones_like(input_ids),
                         "token_type_ids": np.zeros_like(input_ids)}
                hidden = self.session.run(None, feeds)[0]
                pooled = hidden.mean(axis=1, dtype=np.float32)
                norms = np.linalg.norm(pooled, axis=1, keepdims=True)
                out[chunk] = pooled / np.maximum(norms, 1e-12)
        return out


def main(argv: list[str] | None = None) -> int:
    """`python -m engine.llm.onnx_encoder [MODEL_PATH]`: export the model, float32 and int8, into the environment
    (install time)."""
    import argparse

    from engine.llm.model_files import default_model_path

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("model", nargs="?", help="sentence-transformers model folder (default: the packaged MiniLM)")
    ap.add_argument("--into", help=f"folder for the exported file (default: {installed_dir()})")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = args.model or default_model_path()
    folder = Path(args.into) if args.into else installed_dir()
    for precision in PRECISIONS:
        print(f"ONNX encoder of {model}, {precision}: {build(model, folder, precision)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
