"""Measure real peak memory of `mlx_lm lora` training steps on tiny models.

Each case builds a small model from a config dict with mlx_lm's own model
classes, prepares it exactly as ``mlx_lm.lora.train_model`` does (freeze, then
``linear_to_lora_layers`` on the last N blocks, or unfreeze the last N blocks
for ``full``), optionally quantises the base with ``mlx.nn.quantize`` first (as
``mlx_lm.convert -q`` / loading a quantised checkpoint does), and then runs the
trainer's own step: ``nn.value_and_grad(model, default_loss)`` +
``optimizer.update`` inside ``mx.compile(inputs=state, outputs=state)``, with
``tuner.trainer.grad_checkpoint`` patched in when asked, followed by the
trainer's ``mx.eval(state, ...)`` and ``_clear_cache(0)``.

Around each steady-state step (step >= 2) it records ``mx.get_active_memory()``
before the step (weights + optimizer state + anything resident) and
``mx.get_peak_memory()`` after ``mx.reset_peak_memory()``.

Every case runs in its own subprocess: ``grad_checkpoint`` patches the block
class's ``__call__`` globally and the allocator's cache must start empty.

CLI::

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 \
      .venv-mlx/bin/python -m calibration.mlx_trace --out validation/data/mlx_fixtures.json

``--only NAME`` runs one case, ``--list`` lists the matrix, ``--probe`` also
runs the lazy-graph probes (forward-only active memory, uncompiled step,
eval of gradients before the update).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from functools import partial

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# --------------------------------------------------------------------------
# case construction (importable without mlx)


def _cases():
    from calibration.mlx_cases import CASES, LONG_CASES, PROBE_CASES, REAL_CASES

    return CASES + REAL_CASES + PROBE_CASES + LONG_CASES


# --------------------------------------------------------------------------
# one case, run inside a fresh interpreter


def _nbytes(tree):
    from mlx.utils import tree_flatten

    return int(sum(v.nbytes for _, v in tree_flatten(tree) if hasattr(v, "nbytes")))


def _count(tree):
    from mlx.utils import tree_flatten

    return int(sum(v.size for _, v in tree_flatten(tree) if hasattr(v, "size")))


def build_model(config, dtype_name):
    import mlx.core as mx
    from mlx_lm.utils import MODEL_REMAPPING  # mistral → llama, as mlx_lm.load does (utils.py:48-60)

    model_type = MODEL_REMAPPING.get(config["model_type"], config["model_type"])
    mod = importlib.import_module(f"mlx_lm.models.{model_type}")
    args = mod.ModelArgs.from_dict(config)
    model = mod.Model(args)
    if getattr(model, "tie_word_embeddings", None) is False and "lm_head" in model and config.get("tie_word_embeddings", True):
        # Gemma 3 builds an lm_head and ties it only when the checkpoint has no lm_head.weight
        # (gemma3_text.py sanitize), which is what mlx_lm.load sees for the published checkpoints.
        model.sanitize({})
    model.set_dtype(getattr(mx, dtype_name))
    mx.eval(model.parameters())
    return model


def prepare(model, setup):
    """Quantise (optional) then freeze / LoRA exactly as mlx_lm.lora.train_model."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm.tuner.utils import linear_to_lora_layers

    q = setup.get("quant")
    if q:
        # mlx_lm.utils.load -> nn.quantize(model, group_size, bits, mode) with the
        # default predicate: every module with to_quantized (Linear, Embedding).
        nn.quantize(model, group_size=q["group_size"], bits=q["bits"], mode=q.get("mode", "affine"))
    mx.eval(model.parameters())

    mx.random.seed(0)
    model.freeze()
    n = setup["num_layers"]  # -1 -> layers[-0:] == all, as in lora.py:241 / utils.py:113
    if n > len(model.layers):
        raise ValueError("num_layers larger than the model")
    if setup["method"] == "full":
        for layer in model.layers[-max(n, 0) :]:
            layer.unfreeze()
    else:
        linear_to_lora_layers(
            model,
            n,
            {"rank": setup["rank"], "scale": setup.get("scale", 20.0), "dropout": setup.get("dropout", 0.0)},
            use_dora=(setup["method"] == "dora"),
        )
    mx.eval(model.parameters())


def make_optimizer(name, lr=1e-5):
    import mlx.optimizers as optim

    cls = {"adam": optim.Adam, "adamw": optim.AdamW, "sgd": optim.SGD,
           "adafactor": optim.Adafactor, "muon": optim.Muon}[name]
    return cls(learning_rate=lr)


def run_case(case, probe=False):
    import mlx.core as mx
    import mlx.nn as nn
    import mlx_lm
    import numpy as np
    from mlx.nn.utils import average_gradients
    from mlx.utils import tree_map
    from mlx_lm.tuner import trainer as T

    cfg, setup = case["config"], case["setup"]
    t0 = time.perf_counter()
    mx.random.seed(0)
    model = build_model(cfg, setup["dtype"])
    weights_bytes_before_quant = _nbytes(model.parameters())
    prepare(model, setup)

    params_bytes = _nbytes(model.parameters())
    trainable = model.trainable_parameters()
    trainable_bytes = _nbytes(trainable)
    trainable_count = _count(trainable)
    del trainable  # holding it would pin the initial trainable arrays (one extra copy)

    optimizer = make_optimizer(setup["optimizer"])
    if setup["grad_checkpoint"]:
        T.grad_checkpoint(model.layers[0])  # as trainer.train, line 236-237

    loss_fn = T.default_loss
    loss_value_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state, mx.random.state]

    def step_fn(batch, prev_grad, do_update):
        (lvalue, toks), grad = loss_value_and_grad(model, *batch)
        if prev_grad is not None:
            grad = tree_map(lambda x, y: x + y, grad, prev_grad)
        if do_update:
            grad = average_gradients(grad)
            optimizer.update(model, grad)
            grad = None
        return lvalue, toks, grad

    compiled = setup.get("compile", True)
    step = partial(mx.compile, inputs=state, outputs=state)(step_fn) if compiled else step_fn

    B, L = setup["batch"], setup["seq_len"]
    rng = np.random.default_rng(0)

    def batch():
        # iterate_batches pads to 1 + 32k; default_loss feeds batch[:, :-1]
        arr = rng.integers(1, cfg["vocab_size"], size=(B, L + 1)).astype(np.int32)
        lengths = np.array([[0, L + 1]] * B, dtype=np.int32)
        return mx.array(arr), mx.array(lengths)

    model.train()
    records = []
    n_steps = setup.get("steps", 3)
    for it in range(1, n_steps + 1):
        b = batch()
        mx.eval(b)
        mx.eval(state)
        T._clear_cache(0)
        active_before = mx.get_active_memory()
        mx.reset_peak_memory()
        ts = time.perf_counter()
        lvalue, toks, g = step(b, None, True)
        mx.eval(state, lvalue, toks)
        dt = time.perf_counter() - ts
        peak = mx.get_peak_memory()
        active_after = mx.get_active_memory()
        cache_after = mx.get_cache_memory()
        T._clear_cache(0)
        records.append({"step": it, "active_before": int(active_before), "peak": int(peak),
                        "active_after": int(active_after), "cache_after": int(cache_after),
                        "seconds": round(dt, 4), "loss": float(lvalue.item())})
        del lvalue, toks, g

    out = {
        "measured": {
            "steps": records,
            "steady_peak_bytes": max(r["peak"] for r in records[1:]),
            "steady_active_before_bytes": records[-1]["active_before"],
            "peak_minus_active_bytes": max(r["peak"] for r in records[1:]) - records[-1]["active_before"],
            "params_bytes": params_bytes,
            "weights_bytes_unquantised": weights_bytes_before_quant,
            "trainable_bytes": trainable_bytes,
            "trainable_params": trainable_count,
            "optimizer_state_bytes": _nbytes(optimizer.state),
        }
    }

    if probe:
        out["probes"] = lazy_probes(model, loss_fn, loss_value_and_grad, optimizer, batch, state)
    out["wall_seconds"] = round(time.perf_counter() - t0, 2)
    out["versions"] = {"mlx": mx.__version__, "mlx_lm": mlx_lm.__version__,
                       "device": str(mx.default_device()),
                       "blas": os.environ.get("LD_PRELOAD", "bundled reference BLAS")}
    return out


def lazy_probes(model, loss_fn, loss_value_and_grad, optimizer, batch, state):
    """How the lazy graph holds memory: forward only, uncompiled step, split evals."""
    import mlx.core as mx
    from mlx_lm.tuner import trainer as T

    res = {}

    def fresh():
        b = batch()
        mx.eval(b, state)
        T._clear_cache(0)
        return b

    # 1. forward + loss only (no grad): activations are freed as soon as consumed.
    b = fresh()
    a0 = mx.get_active_memory()
    mx.reset_peak_memory()
    lv, _ = loss_fn(model, *b)
    mx.eval(lv)
    res["forward_loss_only"] = {"active_before": a0, "peak": mx.get_peak_memory()}

    # 2. logits only (the vocabulary-sized output held, not reduced).
    b = fresh()
    a0 = mx.get_active_memory()
    mx.reset_peak_memory()
    logits = model(b[0][:, :-1])
    mx.eval(logits)
    res["logits_only"] = {"active_before": a0, "peak": mx.get_peak_memory(),
                          "active_after": mx.get_active_memory(), "logits_bytes": logits.nbytes}
    del logits

    # 3. value_and_grad, uncompiled, grads evaluated (no optimizer update).
    b = fresh()
    a0 = mx.get_active_memory()
    mx.reset_peak_memory()
    (lv, _), g = loss_value_and_grad(model, *b)
    mx.eval(lv, g)
    res["grad_only_uncompiled"] = {"active_before": a0, "peak": mx.get_peak_memory(),
                                   "active_after": mx.get_active_memory()}

    # 4. then the update as a separate eval (grads resident during update).
    mx.reset_peak_memory()
    optimizer.update(model, g)
    mx.eval(state)
    res["update_after_grad_eval"] = {"peak": mx.get_peak_memory()}
    del g, lv

    # 5. the same step uncompiled in one eval (grad + update together).
    b = fresh()
    a0 = mx.get_active_memory()
    mx.reset_peak_memory()
    (lv, _), g = loss_value_and_grad(model, *b)
    optimizer.update(model, g)
    mx.eval(state, lv)
    res["step_uncompiled_one_eval"] = {"active_before": a0, "peak": mx.get_peak_memory()}
    del g, lv
    return res


def sdpa_probe(lengths=(256, 512, 1024), heads=8, head_dim=64, batch=1):
    """Peak of value_and_grad through mx.fast.scaled_dot_product_attention vs an
    explicit unfused attention (scores materialised). Equal peaks that grow with
    heads x L^2 mean the training path is unfused on this backend."""
    import mlx.core as mx

    def fast(q, k, v):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=head_dim**-0.5, mask="causal").sum()

    def explicit(q, k, v):
        L = q.shape[2]
        s = (q * head_dim**-0.5) @ k.swapaxes(-1, -2)
        m = mx.arange(L)[:, None] >= mx.arange(L)[None]
        s = mx.where(m, s, mx.finfo(s.dtype).min)
        return (mx.softmax(s, axis=-1, precise=True) @ v).sum()

    out = []
    for L in lengths:
        row = {"batch": batch, "heads": heads, "head_dim": head_dim, "seq_len": L,
               "scores_bytes_fp32": batch * heads * L * L * 4}
        for name, f in (("fast_sdpa", fast), ("explicit", explicit)):
            for grad in (False, True):
                q, k, v = (mx.random.normal((batch, heads, L, head_dim)) for _ in range(3))
                mx.eval(q, k, v)
                mx.clear_cache()
                a0 = mx.get_active_memory()
                mx.reset_peak_memory()
                if grad:
                    r = mx.value_and_grad(f, argnums=(0, 1, 2))(q, k, v)
                else:
                    r = f(q, k, v)
                mx.eval(r)
                row[f"{name}_{'grad' if grad else 'forward'}_peak_minus_active"] = int(mx.get_peak_memory() - a0)
                del r, q, k, v
        out.append(row)
    return out


# --------------------------------------------------------------------------
# driver


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "validation/data/mlx_fixtures.json"))
    ap.add_argument("--only", action="append", help="case name (repeatable)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--probe", action="store_true", help="lazy-graph probes on every case")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--sdpa-probe", action="store_true", help="only the SDPA fused/unfused probe, stored under 'sdpa_probe'")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        case = json.loads(args.child)
        res = run_case(case, probe=case.get("probe", False))
        print("@@RESULT@@" + json.dumps(res))
        return 0

    if args.sdpa_probe:
        import mlx.core as mx
        import mlx_lm

        rows = sdpa_probe()
        for r in rows:
            print(r)
        doc = json.load(open(args.out)) if os.path.exists(args.out) else {"fixtures": []}
        doc["sdpa_probe"] = {"rows": rows, "versions": {"mlx": mx.__version__, "mlx_lm": mlx_lm.__version__,
                                                        "device": str(mx.default_device())}}
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
        return 0

    cases = _cases()
    if args.list:
        for c in cases:
            print(c["name"])
        return 0
    if args.only:
        cases = [c for c in cases if c["name"] in set(args.only)]

    existing = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            for fx in json.load(f).get("fixtures", []):
                existing[fx["name"]] = fx

    env = dict(os.environ)
    blas = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
    if "LD_PRELOAD" not in env and os.path.exists(blas):
        env["LD_PRELOAD"] = blas
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    t_all = time.perf_counter()
    for c in cases:
        c = dict(c)
        if args.probe:
            c["probe"] = True
        t = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-m", "calibration.mlx_trace", "--child", json.dumps(c)],
                               cwd=REPO, env=env, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{c['name']}: TIMEOUT", flush=True)
            continue
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("@@RESULT@@")]
        if p.returncode or not line:
            print(f"{c['name']}: FAILED rc={p.returncode}\n{p.stderr[-2000:]}", flush=True)
            continue
        res = json.loads(line[0][len("@@RESULT@@"):])
        fx = {"name": c["name"], "config": c["config"], "setup": c["setup"], **res}
        existing[c["name"]] = fx
        m = res["measured"]
        print(f"{c['name']}: peak {m['steady_peak_bytes']/2**20:.2f} MiB, active {m['steady_active_before_bytes']/2**20:.2f} MiB,"
              f" {time.perf_counter()-t:.1f}s", flush=True)
        _write(args.out, existing)
    print(f"total {time.perf_counter()-t_all:.1f}s")
    return 0


def _write(path, fixtures):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc = {
        "about": "Measured mx.get_peak_memory() / mx.get_active_memory() around steady-state "
                 "mlx_lm lora training steps on tiny models (CPU backend). See docs/mlx.md and "
                 "calibration/mlx_trace.py.",
        "units": "bytes",
        "fixtures": sorted(fixtures.values(), key=lambda f: f["name"]),
    }
    if os.path.exists(path):
        old = json.load(open(path))
        if "sdpa_probe" in old:
            doc["sdpa_probe"] = old["sdpa_probe"]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
