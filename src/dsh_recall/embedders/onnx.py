"""A local ONNX transformer embedder: the shipped MiniLM model or a user-supplied folder.

A model folder holds `model.onnx` (a BERT-style encoder whose first output is the
last hidden state), `tokenizer.json` (Hugging Face `tokenizers` format), and optionally
`config.json` (pooling, max_tokens, dim, prefixes) and `SHA256SUMS`. The shipped folder
always has SHA256SUMS and it is verified before the model is trusted.

Loading is lazy: constructing the embedder reads nothing heavy, the first `embed`
verifies, loads the tokenizer and starts an onnxruntime session.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import threading
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..core.config import EmbedderConfig
from ..core.errors import EmbedderError, MissingExtraError, RecallError
from .base import Embedder

# Padded tokens per onnxruntime call. Activations grow with rows x length (and the
# attention with length squared); a cap keeps one call small however large the caller's
# batch is. On 256-token code chunks (bench/embedders.py) 2048 peaked near 300 MB RSS and
# ran 2-5x faster than 8192 (~520 MB): without the arena, big tensors cost fresh pages.
MAX_BATCH_TOKENS = 2048
# The fingerprint hashes this much of model.onnx (plus its size): enough to tell two
# models apart without reading a large file on every start.
_ID_PREFIX_BYTES = 1 << 20


class _MissingRuntime(MissingExtraError):
    """onnxruntime / tokenizers are regular dependencies; say how to bring them back."""

    def __init__(self, module: str):
        RecallError.__init__(
            self,
            f"{module} is not installed, and the local embedder needs it; install it with "
            f"`pip install {module}` (or reinstall dsh-recall), or set embedder.name = 'http'",
        )


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def shipped_model_dir(name: str) -> Path:
    """The folder of a model shipped inside the package (`embedders/models/<name>`)."""
    return Path(__file__).resolve().parent / "models" / name


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_checksums(model_dir: Path, required: bool) -> None:
    """Check every file listed in SHA256SUMS; raise EmbedderError on a mismatch or a gap."""
    sums = model_dir / "SHA256SUMS"
    if not sums.is_file():
        if required:
            raise EmbedderError(
                f"model folder {model_dir} has no SHA256SUMS; the installation is incomplete, "
                "reinstall dsh-recall"
            )
        return
    stamps = _read_stamps()
    changed = False
    for lineno, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2:
            raise EmbedderError(f"{sums}: line {lineno} is not '<sha256>  <file>'")
        digest, fname = parts[0].lower(), parts[1].strip().lstrip("*")
        path = model_dir / fname
        if not path.is_file():
            raise EmbedderError(
                f"model file {path} is missing (listed in SHA256SUMS); reinstall dsh-recall "
                "or restore the folder"
            )
        key = _stat_key(path)
        if stamps.get(key) == digest:
            continue  # this very file was hashed to `digest` before
        actual = _sha256(path)
        if actual != digest:
            raise EmbedderError(
                f"model file {path} does not match SHA256SUMS (expected {digest[:12]}..., "
                f"got {actual[:12]}...); the file is damaged: reinstall dsh-recall or "
                "restore the folder"
            )
        stamps[key], changed = digest, True
    if changed:
        _write_stamps(stamps)


def _stat_key(path: Path) -> str:
    """What changes whenever a file's bytes could have: size, inode and both times (ctime
    moves on every write and cannot be set back)."""
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_ino}|{st.st_mtime_ns}|{st.st_ctime_ns}"


def _stamp_file() -> Path:
    from ..core.paths import recall_home

    return recall_home() / "cache" / "verified.json"


def _read_stamps() -> dict[str, str]:
    """Files (by stat key) hashed before, and their digests: hashing the 23 MB model cost
    every cold process about 50 ms."""
    try:
        data = json.loads(_stamp_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and len(data) < 200 else {}


def _write_stamps(stamps: dict[str, str]) -> None:
    try:
        f = _stamp_file()
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f".{f.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(stamps), encoding="utf-8")
        os.replace(tmp, f)
    except OSError:
        pass  # no stamp: the next process hashes again


class OnnxEmbedder(Embedder):
    """Sentence embeddings from an ONNX encoder: tokenise, run, pool, normalise."""

    # 2: one text per run (see one_text_per_run); 3: the shipped model's window is 128 tokens
    version = "3"
    # Off: int8 activations are quantized per batch, so regrouping texts moves every vector a
    # little (cosine 0.995 to the ungrouped ones), which cost 2 SWE-bench dev issues; real
    # chunks mostly reach the token limit anyway, so there was little padding to save.
    length_buckets = False
    # One text per model run: an int8 model quantizes its activations with one scale per run,
    # so a text embedded beside others got a vector that depended on its company (cosine
    # 0.98-0.99 to its own vector alone; two builds of one tree shared 8% of their vectors
    # bit for bit), and a query (always alone) met documents embedded in company. Alone,
    # every text always gets the same vector, and real chunks run faster too (no padding).
    one_text_per_run = True
    optimized_cache = True  # keep the optimized graph under the recall home (see _load)
    model_dir: Path  # always a folder here

    def __init__(self, model_dir: str | Path, cfg: EmbedderConfig, name: str = "minilm"):
        self.name = name
        self.model_dir = Path(model_dir).expanduser()
        self.cfg = cfg
        self.batch_size = cfg.batch_size
        # The shipped folder must verify; a user's own folder may go without SHA256SUMS.
        self._checksums_required = name != "onnx"
        self._meta_cache: dict[str, Any] | None = None
        self._model_id: str | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: list[str] = []
        self._workers = 1  # threads running texts side by side, set by _load
        self._lock = threading.Lock()

    # -- metadata (cheap, no model load) ------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        if self._meta_cache is None:
            if not (self.model_dir / "model.onnx").is_file():
                raise EmbedderError(
                    f"no model.onnx in {self.model_dir}; embedder.model_dir must be a folder "
                    "with model.onnx and tokenizer.json"
                )
            path = self.model_dir / "config.json"
            meta: dict[str, Any] = {}
            if path.is_file():
                try:
                    meta = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as e:
                    raise EmbedderError(f"cannot read {path}: {e}") from e
                if not isinstance(meta, dict):
                    raise EmbedderError(f"{path} must hold a JSON object")
            self._meta_cache = meta
        return self._meta_cache

    def _setting(self, key: str, default: Any) -> Any:
        """An explicitly set config value wins over the model folder's config.json."""
        if key in self.cfg.model_fields_set:
            return getattr(self.cfg, key)
        return self._meta().get(key, default)

    @property
    def pooling(self) -> str:
        pooling = self._setting("pooling", self.cfg.pooling)
        if pooling not in ("mean", "cls"):
            raise EmbedderError(f"unknown pooling '{pooling}' in {self.model_dir}; use mean or cls")
        return pooling

    @property
    def max_tokens(self) -> int:
        limit = int(self._meta().get("max_positions", 512))
        return max(8, min(int(self._setting("max_tokens", self.cfg.max_tokens)), limit))

    def prefix(self, query: bool) -> str:
        return str(self._setting("query_prefix" if query else "doc_prefix", ""))

    @property
    def dim(self) -> int:  # type: ignore[override]  # a read-only property where the base has a plain attribute
        meta_dim = self._meta().get("dim")
        if meta_dim:
            return int(meta_dim)
        self._load()  # no config.json: ask the model itself
        return int(self._meta()["dim"])  # the cache _load filled

    @property
    def model_id(self) -> str:
        """Short identity of model.onnx: sha256 of its size and first MiB."""
        if self._model_id is None:
            path = self.model_dir / "model.onnx"
            self._meta()  # clear error if the file is missing
            h = hashlib.sha256(str(path.stat().st_size).encode())
            with path.open("rb") as f:
                h.update(f.read(_ID_PREFIX_BYTES))
            self._model_id = h.hexdigest()[:12]
        return self._model_id

    @property
    def fingerprint(self) -> str:
        # Model identity, pooling and prefixes all change the vector space.
        prefixes = self.prefix(True) + "\x00" + self.prefix(False)
        extra = ""
        if prefixes != "\x00":
            extra = ":" + hashlib.sha256(prefixes.encode()).hexdigest()[:8]
        # A token limit other than the model's own cuts different text: another space too
        # (the default keeps the fingerprint it always had).
        if self.max_tokens != int(self._meta().get("max_tokens", 256)):
            extra += f":t{self.max_tokens}"
        return f"{self.name}:{self.version}:{self.model_id}:{self.pooling}{extra}:{self.dim}"

    # -- loading -------------------------------------------------------------------------

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
            except ImportError:
                raise _MissingRuntime("onnxruntime") from None
            try:
                from tokenizers import Tokenizer
            except ImportError:
                raise _MissingRuntime("tokenizers") from None
            meta = self._meta()
            verify_checksums(self.model_dir, self._checksums_required)
            tok_path = self.model_dir / "tokenizer.json"
            if not tok_path.is_file():
                raise EmbedderError(f"no tokenizer.json in {self.model_dir}")
            try:
                tokenizer = Tokenizer.from_file(str(tok_path))
            except Exception as e:  # tokenizers raises plain Exception subclasses
                raise EmbedderError(f"cannot load {tok_path}: {e}") from e
            # The shipped tokenizer.json pads and truncates to 128 by default; we pad
            # per batch ourselves and truncate at the configured limit.
            tokenizer.no_padding()
            tokenizer.enable_truncation(self.max_tokens)

            opts = ort.SessionOptions()
            # The arena keeps the peak of every batch shape it has seen (2-8 GB on big
            # batches); without it memory goes back after each call.
            opts.enable_cpu_mem_arena = False
            opts.enable_mem_pattern = False
            opts.log_severity_level = 3
            # On a shared machine spinning worker threads burn the cores other work needs
            # (and that our own next batch needs): idle threads sleep instead. One pool, as
            # many threads as cores this process may run on.
            # With one text per run, texts run side by side (self._workers threads, one core
            # each: _run_all); otherwise one run spreads over the cores.
            cores = self.cfg.threads or available_cores()
            self._workers = cores if self.one_text_per_run else 1
            opts.intra_op_num_threads = 1 if self._workers > 1 else cores
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
            session = self._session_from_cache(ort, opts)
            if session is None:
                try:
                    session = ort.InferenceSession(
                        str(self.model_dir / "model.onnx"), opts, providers=["CPUExecutionProvider"]
                    )
                except Exception as e:  # onnxruntime raises its own untyped errors
                    raise EmbedderError(f"cannot load {self.model_dir / 'model.onnx'}: {e}") from e
            self._input_names = [i.name for i in session.get_inputs()]
            if "input_ids" not in self._input_names:
                raise EmbedderError(
                    f"{self.model_dir / 'model.onnx'} has inputs {self._input_names}; "
                    "expected a BERT-style encoder with input_ids and attention_mask"
                )
            out_shape = session.get_outputs()[0].shape
            model_dim = out_shape[-1] if out_shape and isinstance(out_shape[-1], int) else None
            if model_dim is None:
                model_dim = self._run(session, tokenizer, ["dimension probe"]).shape[1]
            if meta.get("dim") and int(meta["dim"]) != int(model_dim):
                raise EmbedderError(
                    f"{self.model_dir}/config.json says dim {meta['dim']} but the model "
                    f"outputs {model_dim}; fix config.json"
                )
            meta["dim"] = int(model_dim)
            self._tokenizer, self._session = tokenizer, session

    def _optimized_path(self, ort: Any) -> Path | None:
        """Where this model's graph, optimized once by onnxruntime, is kept: under the recall
        home, keyed by the model file (path, size, mtime, content id), the runtime version and
        the machine type. None when there is no usable home."""
        try:
            from ..core.paths import recall_home

            model = self.model_dir / "model.onnx"
            st = model.stat()
            key = "|".join([str(model.resolve()), str(st.st_size), str(st.st_mtime_ns),
                            self.model_id, ort.__version__, platform.machine()])
            return recall_home() / "cache" / "onnx" / (
                hashlib.sha256(key.encode()).hexdigest()[:24] + ".onnx")
        except (OSError, ValueError):
            return None

    def _session_from_cache(self, ort: Any, opts: Any) -> Any:
        """A session from the cached optimized graph (loading it skips the optimizer: about
        70 of the 100-170 ms a cold process spent creating the session), writing that graph
        first if it is not there. None: create the session the plain way."""
        if not self.optimized_cache:
            return None
        path = self._optimized_path(ort)
        if path is None:
            return None
        providers = ["CPUExecutionProvider"]
        if path.is_file():
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:
                return ort.InferenceSession(str(path), opts, providers=providers)
            except Exception:  # noqa: BLE001 - damaged or foreign: rebuild it below
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    return None  # the plain load optimizes as it always did
        # Extended, not all: the "all" level adds layout changes tied to this CPU's features,
        # and a recall home may be shared; the transformer fusions are all in "extended".
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            opts.optimized_model_filepath = str(tmp)
            session = ort.InferenceSession(str(self.model_dir / "model.onnx"), opts,
                                           providers=providers)
            os.replace(tmp, path)  # whole or absent: a killed writer leaves only its tmp
            return session
        except Exception:  # noqa: BLE001 - no cache then; the plain load says what is wrong
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            opts.optimized_model_filepath = ""
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            return None

    # -- inference -----------------------------------------------------------------------

    def _run(self, session: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
        """Tokenise, run in token-capped sub-batches sorted by length, pool; input order kept."""
        # Some exports take int32 ids; feed each input the type it declares.
        types = {
            i.name: (np.int32 if i.type == "tensor(int32)" else np.int64)
            for i in session.get_inputs()
        }
        encs = tokenizer.encode_batch(texts)
        lengths = [max(1, len(e.ids)) for e in encs]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        groups: list[list[int]] = []
        start = 0
        while start < len(order):
            # Ascending lengths: grow the sub-batch while rows x longest fits the cap.
            end = start + 1
            while (not self.one_text_per_run and end < len(order)
                   and (end + 1 - start) * lengths[order[end]] <= MAX_BATCH_TOKENS):
                end += 1
            groups.append(order[start:end])
            start = end
        pooled: list[np.ndarray | None] = [None] * len(groups)

        def run_group(g: int) -> None:
            idx = groups[g]
            width = lengths[idx[-1]]
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[row, :n] = encs[i].ids
                mask[row, :n] = 1
            inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            feeds = {
                name: inputs[name].astype(t, copy=False) for name, t in types.items() if name in inputs
            }
            try:
                hidden = session.run(None, feeds)[0]
            except Exception as e:  # onnxruntime raises its own untyped errors
                raise EmbedderError(f"model {self.name} failed on a batch: {e}") from e
            pooled[g] = self._pool(np.asarray(hidden, dtype=np.float32), mask)

        self._run_all(run_group, len(groups))
        filled = cast(list[np.ndarray], pooled)  # _run_all ran every group or raised
        out = np.zeros((len(texts), filled[0].shape[1]), dtype=np.float32)
        for idx, vecs in zip(groups, filled):
            out[idx] = vecs
        return out

    def _run_all(self, run_group: Any, count: int) -> None:
        """Run groups 0..count-1: in this thread, or on `self._workers` threads that each take
        the next group (onnxruntime releases the GIL and a session may be run from several
        threads at once). Texts run side by side on one thread each go 1.6-2x faster than one
        text at a time spread over the cores: a text's matrices are too small to split well."""
        workers = min(self._workers, count)
        if workers <= 1:
            for g in range(count):
                run_group(g)
            return
        tickets = iter(range(count))
        take = threading.Lock()
        failed: list[BaseException] = []

        def worker() -> None:
            while not failed:
                with take:
                    g = next(tickets, None)
                if g is None:
                    return
                try:
                    run_group(g)
                except BaseException as e:  # noqa: BLE001 - handed to the caller below
                    failed.append(e)

        threads = [threading.Thread(target=worker, name="dsh-recall-embed", daemon=True)
                   for _ in range(workers - 1)]
        for t in threads:
            t.start()
        worker()
        for t in threads:
            t.join()
        if failed:
            raise failed[0]

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if hidden.ndim == 2:  # the model pooled already
            return hidden
        if self.pooling == "cls":
            return hidden[:, 0, :]
        m = mask[:, :, None].astype(np.float32)
        return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        self._load()
        prefix = self.prefix(query)
        if prefix:
            texts = [prefix + t for t in texts]
        return self._run(self._session, self._tokenizer, texts)
