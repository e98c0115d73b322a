"""Trace the tensor-level memory peak of LitGPT 0.5.13 training steps (LitGPT's own GPT, not HF modules).

Developer tool, companion of exact/trace.py (the tracer): same method (FakeTensorMode + the frozen-parameter-safe
MemTracker subclass of exact.trace; model built on meta, then ``to_empty``; a warm-up cycle, then the
steady-state cycle is measured), but the model and the step are LitGPT's:

* model: ``litgpt.lora.GPT(Config.from_name(name, lora_r=..., lora_query=..., ...))`` +
  ``mark_only_lora_as_trainable`` for LoRA, ``litgpt.model.GPT`` for full fine-tuning; ``model.to(bfloat16)``
  (Fabric's ``bf16-true`` ``convert_module``), then ``model.max_seq_length = T`` as ``fit()`` does (this rebuilds
  the RoPE cache in fp32, which is what a real run trains with);
* LoRA step (litgpt/finetune/lora.py ``fit``): ``logits = model(input_ids, lm_head_chunk_size=128)``;
  ``logits[-1] = logits[-1][..., :-1, :]``; ``loss = chunked_cross_entropy(logits, targets[..., 1:])``;
  ``loss.backward()``; the loop variables ``logits``/``loss`` stay referenced until the next iteration reassigns
  them (as in the real loop);
* full step (litgpt/finetune/full.py ``fit``): ``logits = model(input_ids)`` (no lm_head chunking there);
  ``loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])``;
* optimizer: ``torch.optim.AdamW(trainable, lr, weight_decay, betas, foreach=True)`` (LitGPT's
  ``instantiate_torch_optimizer`` passes no fused flag, so CUDA runs take the foreach path; on CPU foreach must
  be asked for), ``optimizer.step()`` every ``accum`` micro-steps, then ``zero_grad()`` (set_to_none);
* LoRA dropout 0.05 by default (every config_hub lora.yaml and the 2023 lit-gpt lora.py use 0.05, gemma-2b 0.1;
  the memory does not depend on p > 0); ``--dropout 0`` traces without dropout.

Depth scaling: the real models are traced at ``n_layer = 2`` and ``n_layer = 4`` (fake tensors, so full width is
cheap; depth only costs tracing time) and every byte count is extrapolated linearly,
``x(L) = x(2) + (x(4) - x(2)) / 2 * (L - 2)``. This is exact when the peak happens at the same moment of the step
at both depths (checked: the script prints the peak phase of both traces) because each decoder layer adds the
same weights, optimizer state, gradients and saved activations; ``--check-depth`` traces the real depth too and
prints the extrapolation error (0.0 MB for litgpt-hub-04, -11 and -12 at 22, 16 and 22 layers).

QLoRA (bitsandbytes cannot run on fake tensors) and multi-GPU FSDP rows are skipped.

Usage (needs a venv with torch 2.13.0 and litgpt 0.5.13; the estimator is pure Python and imported from here):

    python3 -m venv /tmp/venv-lit && /tmp/venv-lit/bin/pip install torch==2.13.0 litgpt==0.5.13
    /tmp/venv-lit/bin/python -m calibration.litgpt_trace                 # every single-GPU LoRA/full row
    /tmp/venv-lit/bin/python -m calibration.litgpt_trace --row litgpt-rt-01 --items -o /tmp/out.json
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import json
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from exact.trace import Tracker, categories

warnings.filterwarnings("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)

ROOT = Path(__file__).resolve().parents[1]
CSV_PATH = ROOT / "validation" / "data" / "published_measurements.csv"
GB = 1e9

# validation/data/published_measurements.csv config_id -> litgpt.Config.from_name name
LITGPT_NAMES = {
    "gemma-2b": "gemma-2b",
    "llama-2-7b": "Llama-2-7b-hf",
    "llama-2-13b": "Llama-2-13b-hf",
    "llama-3.1-8b": "Llama-3.1-8B",
    "mistral-7b-v0.1": "Mistral-7B-v0.1",
    "phi-2": "phi-2",
    "phi-3-mini": "Phi-3-mini-4k-instruct",
    "stablelm-base-alpha-3b": "stablelm-base-alpha-3b",
    "tinyllama-1.1b": "tiny-llama-1.1b",
}

# CSV LoRA target names (HF module names) -> litgpt.lora.Config flags
TARGET_FLAGS = {
    "q_proj": ("lora_query",), "k_proj": ("lora_key",), "v_proj": ("lora_value",),
    "qkv_proj": ("lora_query", "lora_key", "lora_value"),
    "query_key_value": ("lora_query", "lora_key", "lora_value"),
    "o_proj": ("lora_projection",), "dense": ("lora_projection",),
    "gate_proj": ("lora_mlp",), "up_proj": ("lora_mlp",), "down_proj": ("lora_mlp",),
    "gate_up_proj": ("lora_mlp",), "fc1": ("lora_mlp",), "fc2": ("lora_mlp",),
    "lm_head": ("lora_head",),
}

# Gradient accumulation of the full-fine-tuning rows (config_hub yaml global/micro batch): tiny-llama/full.yaml
# has global_batch_size 32, micro_batch_size 4 -> 8 micro-steps per optimizer step (2 is enough to show it).
FULL_ACCUM = {"litgpt-hub-04": 2}


# --------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------
def litgpt_rows(all_rows: bool = False) -> list[dict[str, str]]:
    """LitGPT rows of the published CSV: single-GPU LoRA and full (QLoRA and multi-GPU skipped)."""
    with CSV_PATH.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["framework"] == "litgpt"]
    if all_rows:
        return rows
    return [r for r in rows if r["method"] in ("lora", "full") and int(r["gpus"] or 1) == 1]


def lora_flags(row: dict[str, str]) -> dict[str, bool]:
    flags = dict.fromkeys(("lora_query", "lora_key", "lora_value", "lora_projection", "lora_mlp", "lora_head"), False)
    for t in row["lora_targets"].replace(",", ";").split(";"):
        if t:
            for f in TARGET_FLAGS[t]:
                flags[f] = True
    return flags


# --------------------------------------------------------------------------------------------------
# Tracker: exact.trace.Tracker with LitGPT's module names (transformer.h.N) for the regions
# --------------------------------------------------------------------------------------------------
class _LitTracker(Tracker):
    layer_pattern = ".h."  # LitGPT's decoder blocks: transformer.h.N


# --------------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------------
def build_config(row: dict[str, str], n_layer: int | None, dropout: float, vocab: int | None = None):
    name = LITGPT_NAMES[row["config_id"]]
    kwargs: dict[str, Any] = {}
    if n_layer is not None:
        kwargs["n_layer"] = n_layer
    if vocab is not None:  # loss_coefficient(): the same model with another vocabulary size
        kwargs.update(vocab_size=vocab, padded_vocab_size=vocab)
    if row["method"] == "lora":
        from litgpt.lora import Config

        kwargs.update(lora_r=int(row["lora_rank"] or 8), lora_alpha=16, lora_dropout=dropout, **lora_flags(row))
        return Config.from_name(name, **kwargs)
    from litgpt.config import Config

    return Config.from_name(name, **kwargs)


def build_model(config, method: str):
    """On meta, as Fabric bf16-true would leave it: trainability set, every tensor bf16."""
    with torch.device("meta"):
        if method == "lora":
            from litgpt.lora import GPT, mark_only_lora_as_trainable

            model = GPT(config)
            mark_only_lora_as_trainable(model)
        else:
            from litgpt.model import GPT

            model = GPT(config)
    model.to(torch.bfloat16)  # lightning HalfPrecision('bf16-true').convert_module
    model.train()
    return model


def param_counts(model: torch.nn.Module) -> tuple[int, int]:
    ps = {id(p): p for p in model.parameters()}.values()
    return sum(p.numel() for p in ps), sum(p.numel() for p in ps if p.requires_grad)


# --------------------------------------------------------------------------------------------------
# Saved-tensor inventory of one decoder block (autograd graph walk)
# --------------------------------------------------------------------------------------------------
def _saved_tensors(node) -> list[tuple[str, torch.Tensor]]:
    out = []
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            val = getattr(node, attr)
        except Exception:  # noqa: BLE001 - released or not a tensor
            continue
        vals = val if isinstance(val, (list, tuple)) else [val]
        for v in vals:
            if isinstance(v, torch.Tensor):
                out.append((attr[len("_saved_"):], v))
    return out


def block_inventory(out: torch.Tensor, inp: torch.Tensor, exclude: set[int]) -> list[dict[str, Any]]:
    """Every tensor storage saved by the autograd nodes between a block's input and output, once per storage
    (largest view kept); storages in ``exclude`` (parameters, the RoPE cache, the block input) are left out."""
    stop = inp.grad_fn
    seen_nodes: set[int] = set()
    stack = [out.grad_fn]
    by_storage: dict[int, dict[str, Any]] = {}
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen_nodes or node is stop:
            continue
        seen_nodes.add(id(node))
        for attr, t in _saved_tensors(node):
            st = t.untyped_storage()
            key = id(st)
            if key in exclude:
                continue
            nbytes = st.nbytes()
            item = by_storage.get(key)
            entry = {"node": type(node).__name__, "attr": attr, "shape": list(t.shape),
                     "dtype": str(t.dtype).replace("torch.", ""), "storage_bytes": int(nbytes)}
            if item is None:
                by_storage[key] = entry
                entry["also"] = []
            else:
                item["also"].append(f"{entry['node']}.{attr}")
        for nxt, _ in node.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return sorted(by_storage.values(), key=lambda e: -e["storage_bytes"])


# --------------------------------------------------------------------------------------------------
# The LitGPT step
# --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def cuda_dropout():
    """F.dropout as CUDA runs it. aten::dropout takes the fused ``native_dropout`` kernel only for CUDA (XPU,
    lazy, privateuse1) tensors and saves a bool mask (1 byte per element); on CPU it falls back to
    ``input * bernoulli_noise`` and saves a 16-bit noise tensor (2 bytes per element)."""
    import torch.nn.functional as F

    orig = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0.0 < p < 1.0 and not inplace and input.numel() > 0:
            return torch.native_dropout(input, p, True)[0]
        return orig(input, p, training, inplace)

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = orig


def _run(row: dict[str, str], n_layer: int | None, dropout: float, accum: int, items: bool,
         vocab: int | None = None) -> dict[str, Any]:
    from litgpt.utils import chunked_cross_entropy
    from torch._subclasses.fake_tensor import FakeTensorMode

    method = row["method"]
    b, s = int(row["batch"]), int(row["seq_len"])
    config = build_config(row, n_layer, dropout, vocab)
    model = build_model(config, method)
    vocab = config.padded_vocab_size
    torch.manual_seed(0)
    snaps: dict[str, dict[str, int]] = {}
    inventory: list[dict[str, Any]] = []
    with FakeTensorMode(allow_non_fake_inputs=True), cuda_dropout():
        model.to_empty(device="cpu")
        model.max_seq_length = s  # fit(): rebuilds cos/sin for T in fp32 (build_rope_cache)
        p_total, p_train = param_counts(model)
        trainable = [p for p in model.parameters() if p.requires_grad]
        # litgpt finetune defaults: lr 3e-4/2e-4, weight_decay 0.02 / 0.0, betas (0.9, 0.95); no fused flag
        opt = torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.0, betas=(0.9, 0.95), foreach=True)
        tracker = _LitTracker()
        tracker.track_external(model, opt)

        block_io: dict[str, torch.Tensor] = {}
        mid = max(0, config.n_layer // 2)

        def _block_hook(_mod, args, output):
            if record["on"]:
                block_io["in"], block_io["out"] = args[0], output

        def _snap_hook(name):
            def hook(*_a):
                if record["on"]:
                    snaps[name] = categories(tracker._curr_mem_snap)
            return hook

        record = {"on": False}
        model.transformer.h[mid].register_forward_hook(_block_hook)
        model.transformer.ln_f.register_forward_hook(_snap_hook("after_ln_f"))

        logits = loss = input_ids = targets = None  # loop variables, alive across iterations as in fit()
        first_peak = 0
        with tracker:
            for it in range(2 * accum):
                measuring = it >= accum
                if it == accum:
                    gc.collect()
                    first_peak = tracker.peak_total()
                    tracker.reset_mod_stats()
                    tracker.restart_peak()
                elif it:
                    tracker.reset_mod_stats()  # MemTracker refuses a second forward of a module otherwise
                last_micro = it == 2 * accum - 1
                record["on"] = measuring and last_micro
                tracker.new_step()
                tracker.phase_override = "inputs"
                input_ids = torch.randint(0, vocab, (b, s), dtype=torch.long)
                targets = torch.randint(0, vocab, (b, s), dtype=torch.long)
                tracker.phase_override = None
                if record["on"]:
                    snaps["before_forward"] = categories(tracker._curr_mem_snap)
                if method == "lora":
                    logits = model(input_ids, lm_head_chunk_size=128)
                    if record["on"]:
                        snaps["after_model"] = categories(tracker._curr_mem_snap)
                    logits[-1] = logits[-1][..., :-1, :]
                    loss = chunked_cross_entropy(logits, targets[..., 1:])
                else:
                    logits = model(input_ids)
                    if record["on"]:
                        snaps["after_model"] = categories(tracker._curr_mem_snap)
                    loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
                if record["on"]:
                    snaps["after_loss"] = categories(tracker._curr_mem_snap)
                    if items:
                        exclude = {id(p.untyped_storage()) for p in model.parameters()}
                        exclude |= {id(bf.untyped_storage()) for bf in model.buffers()}
                        exclude.add(id(block_io["in"].untyped_storage()))
                        inventory = block_inventory(block_io["out"], block_io["in"], exclude)
                    block_io.clear()
                (loss / accum).backward()
                if record["on"]:
                    snaps["after_backward"] = categories(tracker._curr_mem_snap)
                if (it + 1) % accum == 0:
                    tracker.phase_override = "optimizer_step"
                    opt.step()
                    opt.zero_grad()
                    tracker.phase_override = None
            peak = tracker.peak_total()
            peak_snap = categories(tracker.get_tracker_snapshot("peak"))
            where = dict(tracker.peak_where)
            phase_peaks = dict(tracker.phase_peaks)
            region_peaks = dict(tracker.region_peaks)
            region_snaps = dict(tracker.region_peak_snaps)
        opt_bytes = sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values()
                        if isinstance(v, torch.Tensor) and v.dim() > 0)
        del logits, loss, input_ids, targets
    return {
        "n_layer": config.n_layer, "peak_bytes": int(peak), "peak_by_category": peak_snap,
        "first_step_peak_bytes": int(first_peak), "peak_where": where,
        "phase_peaks": {k: int(v) for k, v in phase_peaks.items()},
        "region_peaks": {k: int(v) for k, v in region_peaks.items()}, "region_peak_snaps": region_snaps,
        "snapshots": snaps, "params_total": p_total, "params_trainable": p_train,
        "optimizer_state_bytes": int(opt_bytes), "block_inventory": inventory,
        "padded_vocab": vocab, "config": {k: getattr(config, k) for k in (
            "n_embd", "n_head", "n_query_groups", "head_size", "intermediate_size", "rope_n_elem",
            "padded_vocab_size", "norm_class_name", "mlp_class_name", "parallel_residual", "shared_attention_norm",
            "sliding_window_size")},
    }


def _lin(x2: float, x4: float, layers: int) -> float:
    return x2 + (x4 - x2) / 2 * (layers - 2)


def trace_row(row: dict[str, str], dropout: float = 0.05, items: bool = False, check_depth: bool = False,
              accum: int | None = None) -> dict[str, Any]:
    """Trace a row at 2 and 4 layers and extrapolate to the real depth."""
    t0 = time.perf_counter()
    if accum is None:
        accum = FULL_ACCUM.get(row["id"], 1) if row["method"] == "full" else 1
    real_layers = build_config(row, None, dropout).n_layer
    r2 = _run(row, 2, dropout, accum, items=False)
    r4 = _run(row, 4, dropout, accum, items=items)
    out: dict[str, Any] = {"id": row["id"], "model": LITGPT_NAMES[row["config_id"]], "method": row["method"],
                           "batch": int(row["batch"]), "seq_len": int(row["seq_len"]), "lora_rank": row["lora_rank"],
                           "targets": row["lora_targets"], "dropout": dropout if row["method"] == "lora" else None,
                           "accum": accum, "n_layer": real_layers, "trace2": r2, "trace4": r4}
    out["peak_bytes"] = _lin(r2["peak_bytes"], r4["peak_bytes"], real_layers)
    out["peak_by_category"] = {k: _lin(r2["peak_by_category"][k], r4["peak_by_category"][k], real_layers)
                               for k in r2["peak_by_category"]}
    out["params_total"] = _lin(r2["params_total"], r4["params_total"], real_layers)
    out["params_trainable"] = _lin(r2["params_trainable"], r4["params_trainable"], real_layers)
    out["same_peak_phase"] = (r2["peak_where"]["phase"], r2["peak_where"]["region"]) == (
        r4["peak_where"]["phase"], r4["peak_where"]["region"])
    tokens = out["batch"] * out["seq_len"]
    a2, a4 = r2["snapshots"], r4["snapshots"]
    # per token per layer: activations alive after the loss forward (everything saved for backward)
    out["layer_saved_per_token"] = (a4["after_loss"]["activations"] - a2["after_loss"]["activations"]) / 2 / tokens
    # what the lm_head + loss keep from the end of the final norm to the start of backward (depth-independent)
    out["loss_kept_bytes"] = a4["after_loss"]["activations"] - a4["after_ln_f"]["activations"]
    out["logits_bytes"] = a4["after_model"]["activations"] - a4["after_ln_f"]["activations"]
    head_bw = r4["region_peaks"].get("backward:head")
    out["loss_backward_extra_bytes"] = (head_bw - a4["after_loss"]["total"]) if head_bw else None
    if check_depth:
        rf = _run(row, None, dropout, accum, items=False)
        out["trace_full_depth"] = {k: rf[k] for k in ("peak_bytes", "peak_where", "params_total")}
        out["extrapolation_error_bytes"] = out["peak_bytes"] - rf["peak_bytes"]
    out["trace_seconds"] = round(time.perf_counter() - t0, 1)
    return out


def loss_coefficient(row: dict[str, str], dropout: float = 0.05, accum: int = 1) -> dict[str, float]:
    """Bytes per (token x vocabulary entry) that the lm_head + loss machinery holds at the step's peak and at the
    head's forward/backward peaks: the row traced at 2 layers with its vocabulary V and with 2V; every
    V-proportional parameter, gradient and optimizer byte is taken out, what is left is T x V activations
    (logits, log-softmax outputs, chunk temporaries, the previous step's logits)."""
    v = build_config(row, 2, dropout).padded_vocab_size
    r1 = _run(row, 2, dropout, accum, items=False, vocab=v)
    r2 = _run(row, 2, dropout, accum, items=False, vocab=2 * v)
    tokens = int(row["batch"]) * int(row["seq_len"])

    def state(r):  # V-proportional model state at the peak
        cat = r["peak_by_category"]
        return cat["parameters"] + cat["gradients"] + cat["optimizer_states"] + cat["buffers"]

    out = {"peak": (r2["peak_bytes"] - state(r2) - r1["peak_bytes"] + state(r1)) / (tokens * v),
           "peak_where_V": f"{r1['peak_where']['phase']}/{r1['peak_where']['region']}",
           "peak_where_2V": f"{r2['peak_where']['phase']}/{r2['peak_where']['region']}"}
    for key in ("forward:head", "backward:head"):
        s1, s2 = r1["region_peak_snaps"].get(key), r2["region_peak_snaps"].get(key)
        if s1 and s2:
            out[key] = (s2["activations"] + s2["temp"] - s1["activations"] - s1["temp"]) / (tokens * v)
    return out


# --------------------------------------------------------------------------------------------------
# Closed form of what one LitGPT decoder layer saves (checked byte for byte against the traces)
# --------------------------------------------------------------------------------------------------
def layer_bytes_per_token(cfg: dict[str, Any], method: str, flags: dict[str, bool], r: int, dropout: float,
                          batch: int, seq_len: int, cuda: bool = True) -> dict[str, float]:
    """Bytes per token saved for backward by one LitGPT 0.5.13 decoder layer, bf16-true (c = 2), SDPA.

    ``cfg``: n_embd, n_head, n_query_groups, head_size, intermediate_size, norm_class_name, mlp_class_name,
    parallel_residual, shared_attention_norm, sliding_window_size. ``cuda=False`` reproduces the CPU trace
    (LayerNorm mean/rstd in bf16 instead of fp32). Returns the terms and their "total"; "per_layer_constant" is
    in bytes per layer (not per token) and is not in "total"."""
    c = 2
    h, H, G, hs, inter = (cfg[k] for k in ("n_embd", "n_head", "n_query_groups", "head_size", "intermediate_size"))
    qd, kvd = H * hs, G * hs
    full, lora = method == "full", method == "lora"
    p = dropout > 0
    t: dict[str, float] = {}
    # norms: LitGPT RMSNorm (x.float() ... .to(dtype)) keeps the fp32 input and the fp32 rstd; with a trainable
    # weight also the fp32 normalised x. F.layer_norm keeps its (bf16) input and fp32 mean + rstd; both norms
    # of a parallel block read the same x, so the input is kept once.
    if cfg["norm_class_name"] == "RMSNorm":
        t["norms"] = 2 * (4 * h + 4 + (4 * h if full else 0))
    else:
        n_ln = 1 if (cfg["parallel_residual"] and cfg["shared_attention_norm"]) else 2
        n_inputs = 1 if cfg["parallel_residual"] else 2
        t["norms"] = n_inputs * c * h + n_ln * (8 if cuda else 4)
    en = [bool(flags.get(f)) for f in ("lora_query", "lora_key", "lora_value")] if lora else [False] * 3
    n_en = sum(en)
    shared_norm_out = not p and cfg["parallel_residual"] and cfg["shared_attention_norm"]
    # qkv: frozen base saves nothing; LoRAQKVLinear: dropout output + bool mask (or the input itself), lora_A
    # output (conv1d input), and zero_pad's index_copy keeps its source when not all of q, k, v are adapted.
    qkv = c * h if full else 0.0
    if n_en:
        qkv += (c + 1) * h if p else c * h
        qkv += c * n_en * r
        if n_en < 3:
            qkv += c * (qd * en[0] + kvd * en[1] + kvd * en[2])
    t["qkv"] = qkv
    # SDPA: q (cat after RoPE), k, v, output, fp32 logsumexp. GQA/MQA: k, v are repeat_interleave copies at q
    # width. MHA: v is a view of the fused qkv output, which stays alive whole.
    t["sdpa"] = (4 * c * qd if G != H else c * (3 * qd + 3 * kvd)) + 4 * H
    if cfg.get("sliding_window_size"):
        t["sdpa"] += 2 * seq_len / batch  # (T, T) bf16 mask built in every layer, saved by SDPA
    # proj: input y = reshape copy of the SDPA output (flash keeps q's BHTD layout)
    proj = c * qd if full else 0.0
    if lora and flags.get("lora_projection"):
        proj += ((c + 1) * qd if p else c * qd) + c * r
    t["proj"] = proj
    gated = cfg["mlp_class_name"] in ("LLaMAMLP", "GemmaMLP")
    mlp = 3 * c * inter if gated else c * inter  # act input (+ act output and up output for the gated product)
    if full:
        mlp += c * h + c * inter
    if lora and flags.get("lora_mlp"):
        if gated:  # fc_1 and fc_2 are separate LoRA modules, each with its own dropout
            mlp += (2 * (c + 1) * h if p else c * h) + 2 * c * r
        else:
            mlp += (0 if shared_norm_out and n_en else ((c + 1) * h if p else c * h)) + c * r
        mlp += ((c + 1) * inter if p else c * inter) + c * r
    t["mlp"] = mlp
    t["total"] = sum(t.values())
    const = 2 * 4 * h if cfg["norm_class_name"] == "RMSNorm" else 0  # weight.float() copies
    if 0 < n_en < 3:
        const += 8 * (qd * en[0] + kvd * en[1] + kvd * en[2])  # int64 lora_ind clone
    t["per_layer_constant"] = const
    return t


# --------------------------------------------------------------------------------------------------
# The estimator's numbers for the same row (same setup as validation.published_rows)
# --------------------------------------------------------------------------------------------------
def estimator_view(row: dict[str, str], grad_accum: int = 1) -> dict[str, Any]:
    from estimator import estimate
    from estimator.job.stack import resolve_setup
    from estimator.memory.hf.activations.common import context
    from estimator.memory.hf.activations.depth import final_per_token, layer_sizes, layers_per_token, rope_per_token
    from estimator.memory.hf.activations.layers import dense_layer
    from estimator.memory.hf.activations.loss import loss_memory
    from estimator.memory.litgpt.model import stack_spec
    from estimator.memory.overhead import ALLOCATOR_SLACK
    from estimator.units import GB as EGB
    from estimator.units import GiB
    from validation import FRAMEWORK_STACKS, _published_spec, _targets

    spec = _published_spec(row["config_id"])
    optimizer = None if row["optimizer"] == "adamw" else row["optimizer"]
    kw: dict[str, Any] = {}
    if grad_accum > 1:
        kw["grad_accum"] = grad_accum
    setup = resolve_setup(
        FRAMEWORK_STACKS[row["framework"]], method=row["method"], precision=row["precision"], optimizer=optimizer,
        batch=int(row["batch"]), seq_len=int(row["seq_len"]), grad_ckpt=row["grad_ckpt"].lower() == "true",
        attention=row["attention"] or "sdpa", lora_rank=int(row["lora_rank"] or 16),
        lora_targets=_targets(row["lora_targets"]), gpus=int(row["gpus"] or 1),  # LitGPT's q/k/v switches
        sharding=row["sharding"] or "none", **kw)
    est = estimate(spec, setup)
    spec = stack_spec(spec, setup)  # as LitGPT builds it (untied head)
    ctx = context(spec, setup)
    dense = layer_sizes(spec, ctx)[0] or dense_layer(spec, ctx)  # LitGPT's closed form on this stack
    loss = loss_memory(spec, setup, ctx)
    unit = GiB if row["measured_unit"] == "GiB" else EGB
    measured = float(row["measured_value"]) * unit
    validation_predicted = est.tensor_bytes * (1 + ALLOCATOR_SLACK) if row["measure"] == "max_reserved" else (
        est.total_bytes if row["measure"] == "nvidia-smi" else est.tensor_bytes)
    return {
        "tensor_bytes": est.tensor_bytes, "validation_estimated_bytes": validation_predicted,
        "measured_bytes": measured, "measure": row["measure"], "peak_phase": est.peak_phase,
        "components": dict(est.components_bytes), "params_total": est.params_total,
        "params_trainable": est.params_trainable,
        "layer_per_token": dense.total, "layer_split": {"norms": dense.norms, "attention": dense.attention,
                                                        "mlp": dense.mlp},
        "layers_per_token_over_L": layers_per_token(spec, ctx) / spec.num_layers,
        "rope_per_token": rope_per_token(spec, ctx), "final_per_token": final_per_token(spec, ctx),
        "loss_kept_bytes": loss.kept, "loss_transient_bytes": loss.transient, "loss_impl": loss.impl,
        "details": [(d.component, d.label, d.bytes) for d in est.details],
    }


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def _g(x: float) -> str:
    return f"{x / GB:7.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--row", action="append", default=[], help="CSV row id (repeatable); default: all traceable")
    ap.add_argument("--dropout", type=float, default=0.05, help="LoRA dropout (0.05 as LitGPT's configs)")
    ap.add_argument("--accum", type=int, default=None, help="micro-steps per optimizer step (default: per row)")
    ap.add_argument("--items", action="store_true", help="list the saved tensors of one decoder block")
    ap.add_argument("--check-depth", action="store_true", help="also trace the real depth (slow)")
    ap.add_argument("--loss-coef", action="store_true",
                    help="also measure the T x V bytes of the head + loss at the peak (traces at V and 2V)")
    ap.add_argument("-o", "--out", help="write the results as JSON")
    args = ap.parse_args(argv)
    rows = litgpt_rows()
    if args.row:
        rows = [r for r in litgpt_rows(all_rows=True) if r["id"] in args.row]
    results = []
    print(f"{'row':<15} {'model':<24} {'meth':<4} {'b':>2} {'T':>5} | {'litgpt':>7} {'est':>7} {'meas':>7} GB"
          f" | lit/meas est/meas | peak phase")
    for row in rows:
        res = trace_row(row, dropout=args.dropout, items=args.items, check_depth=args.check_depth, accum=args.accum)
        res["estimator"] = estimator_view(row)
        if res["accum"] > 1:
            res["estimator_accum"] = estimator_view(row, grad_accum=res["accum"])
        if args.loss_coef:
            res["loss_coefficient"] = loss_coefficient(row, dropout=args.dropout, accum=res["accum"])
        e = res["estimator"]
        w = res["trace4"]["peak_where"]
        print(f"{row['id']:<15} {res['model']:<24} {row['method']:<4} {res['batch']:>2} {res['seq_len']:>5} | "
              f"{_g(res['peak_bytes'])} {_g(e['tensor_bytes'])} {_g(e['measured_bytes'])}    | "
              f"{100 * (res['peak_bytes'] / e['measured_bytes'] - 1):+6.1f} % "
              f"{100 * (e['tensor_bytes'] / e['measured_bytes'] - 1):+6.1f} % | {w['phase']}/{w['region']}"
              f"{'' if res['same_peak_phase'] else ' (DEPTH-DEPENDENT PEAK)'} [{res['trace_seconds']} s]")
        lit_cfg = res["trace4"]["config"]
        form = layer_bytes_per_token(lit_cfg, row["method"], lora_flags(row) if row["method"] == "lora" else {},
                                     int(row["lora_rank"] or 0), args.dropout, res["batch"], res["seq_len"], cuda=False)
        form_total = form["total"] + form["per_layer_constant"] / (res["batch"] * res["seq_len"])
        res["layer_formula_per_token"] = form
        print(f"    per layer per token: traced {res['layer_saved_per_token']:.1f} B, closed form {form_total:.1f} B, "
              f"estimator {e['layer_per_token']:.0f} B")
        if "trace_full_depth" in res:
            print(f"    real depth traced: {_g(res['trace_full_depth']['peak_bytes'])} GB, extrapolation error "
                  f"{res['extrapolation_error_bytes'] / 1e6:+.1f} MB")
        if "loss_coefficient" in res:
            lc = res["loss_coefficient"]
            print("    head + loss at the peak: " + ", ".join(
                f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in lc.items()) + " bytes per token x V")
        sys.stdout.flush()
        results.append(res)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
