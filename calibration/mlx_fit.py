"""Re-derive the measured constants of the MLX step model (estimator/memory/mlx/step.py, on the model of
estimator/memory/mlx/model.py) from the fixtures.

Every constant in mlx_step.py that is not read from mlx/mlx-lm's source is fixed here, from
validation/data/mlx_fixtures.json (calibration/mlx_trace.py's measurements), and this script prints what the data
give next to what the module uses, so a re-measurement shows at once whether a constant moved:

* LOSS_LOGIT_COPIES: the slope of peak − resident over T·V·bytes in the loss-* probes (tiny block, V 16k-64k);
* the per-block saved tensors: (peak with 4 trained blocks − peak with 1) / 3 against _saved_per_token + the B·H·L²
  probabilities, on the w-*, gqa-*, qdim1024-* and bf16-* probes;
* LOSS_REST_*, BLOCK_REST_* and BLOCK_REST_TWO_BLOCKS*: least squares, relative to each fixture's peak − resident,
  of what remains at the loss backward / at a block's backward, on the calibration probes only (PROBE_CASES), so
  the validation fixtures check them;
* FULL_GRAD_LOSS: full fine-tuning minus its LoRA twin, per trained block's trainable bytes;
* UPDATE_ARRAYS, UPDATE_PER_EXTRA_BLOCK: the upd-* probes (T = 32);
* QUANT_EXTRA_PROBS and DORA_ADAPTED_COPIES: the quantised and DoRA twins.

FULL_GRAD_LOSS, QUANT_EXTRA_PROBS and DORA_ADAPTED_COPIES are read from twins that are also validation fixtures:
those three are fitted and checked on the same measurements.

Pure Python (no mlx): ``python -m calibration.mlx_fit``."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

from estimator import spec_from_config
from estimator.memory import mlx_model as model
from estimator.memory import mlx_step as M
from validation.mlx import MLX_FIXTURES, PROBES, fixture_setup

LLAMA_CLASS = ("llama", "mistral", "qwen2", "qwen3")  # the families the rest terms are fitted on (probes: llama)


def _load(path: Path) -> dict[str, dict]:
    return {fx["name"]: fx for fx in json.loads(path.read_text())["fixtures"]}


def _pa(fx: dict) -> float:
    return float(fx["measured"]["peak_minus_active_bytes"])


def _terms(fx: dict) -> dict[str, float]:
    """The structural terms the model computes for one fixture (bytes)."""
    spec = spec_from_config(fx["config"])
    setup = fixture_setup(fx)
    dm = model.dims(spec, setup)
    roles = model.adapted_roles(spec, setup)
    b = model.float_bytes(setup)
    T = setup.batch * model.positions(setup)
    saved = M._saved_per_token(spec, setup, dm, roles, b)
    probs = M._probs_per_block(spec, setup, dm, b)
    rb = b if setup.method == "full" else 4
    return {"T": T, "h": dm.h, "I": dm.inter, "q": dm.q, "n": dm.trained, "b": b, "rb": rb, "saved_tok": saved, "probs": probs,
            "loss": M.LOSS_LOGIT_COPIES * T * spec.vocab_size * b, "logit_bytes": T * spec.vocab_size * b,
            "block": T * saved + probs}


def _lsq(rows: list[list[float]], y: list[float]) -> list[float]:
    """Least squares by the normal equations (a handful of columns; no numpy needed)."""
    k = len(rows[0])
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    aty = [sum(r[i] * v for r, v in zip(rows, y, strict=True)) for i in range(k)]
    for i in range(k):  # Gauss-Jordan
        p = max(range(i, k), key=lambda r: abs(ata[r][i]))
        ata[i], ata[p], aty[i], aty[p] = ata[p], ata[i], aty[p], aty[i]
        for r in range(k):
            if r != i and ata[i][i]:
                f = ata[r][i] / ata[i][i]
                ata[r] = [a - f * c for a, c in zip(ata[r], ata[i], strict=True)]
                aty[r] -= f * aty[i]
    return [aty[i] / ata[i][i] for i in range(k)]


def main() -> int:
    fx = _load(MLX_FIXTURES)
    out = []

    # 1. the loss: slope over T·V·b
    loss = [f for n, f in fx.items() if n.startswith("loss-V")]
    if loss:
        slopes = []  # over the vocabulary at a fixed length: everything else stays
        for s_ in ("128", "256"):
            a, c = fx.get(f"loss-V16000-S{s_}"), fx.get(f"loss-V64000-S{s_}")
            if a and c:
                slopes.append((_pa(c) - _pa(a)) / (_terms(c)["logit_bytes"] - _terms(a)["logit_bytes"]))
        out.append(("LOSS_LOGIT_COPIES", statistics.mean(slopes), M.LOSS_LOGIT_COPIES))

    # 2. per-block saved tensors: 4 trained blocks vs 1
    ratios = []
    for name, f4 in fx.items():
        if name.endswith("-n4") and (name.startswith(("w-", "gqa-", "qdim", "bf16-"))):
            f1 = fx.get(name[:-1] + "1")
            if f1:
                measured = (_pa(f4) - _pa(f1)) / 3
                ratios.append(measured / _terms(f4)["block"])
    if ratios:
        out.append(("saved per block: measured / model (median)", statistics.median(ratios), 1.0))
        out.append(("saved per block: measured / model (min..max)", min(ratios), max(ratios)))

    # 3. the rest at the loss backward and at a block's backward (LoRA, no checkpointing, no quantisation; the
    # calibration probes only, so the validation fixtures check these terms; not Phi-3, whose fused gate_up has its
    # own terms, 4b)
    base = {n: f for n, f in fx.items() if n in PROBES and f["setup"]["method"] == "lora"
            and not f["setup"]["grad_checkpoint"]
            and not f["setup"].get("quant") and f["setup"].get("compile", True) and f["setup"]["dtype"] == "float32"
            and f["config"]["model_type"] in LLAMA_CLASS}
    loss_rows, loss_y, block_rows, block_y = [], [], [], []
    for f in base.values():
        t = _terms(f)
        rest = _pa(f) - t["n"] * t["block"]
        if t["loss"] > 0.5 * t["n"] * t["block"]:
            w = 1 / _pa(f)  # relative: the error the report measures, so the wide fixtures don't outvote the rest
            loss_rows.append([w * t["T"] * t["rb"] * t["h"], w * t["T"] * t["rb"] * t["I"]])
            loss_y.append(w * (rest - t["loss"]))
        elif t["n"] != 2:  # two trained blocks: BLOCK_REST_TWO_BLOCKS, below
            block_rows.append([t["T"] * t["rb"] * t["h"], t["T"] * t["rb"] * t["I"], t["T"] * t["rb"] * t["q"],
                               t["probs"]])
            block_y.append(rest)
    if loss_rows:
        ch, ci = _lsq(loss_rows, loss_y)
        out += [("LOSS_REST_H", ch, M.LOSS_REST_H), ("LOSS_REST_I", ci, M.LOSS_REST_I)]
    if len(block_rows) >= 4:
        bh, bi, bq, bp = _lsq(block_rows, block_y)
        out += [("BLOCK_REST_H", bh, M.BLOCK_REST_H), ("BLOCK_REST_I", bi, M.BLOCK_REST_I),
                ("BLOCK_REST_Q", bq, M.BLOCK_REST_Q), ("BLOCK_REST_PROBS", bp, M.BLOCK_REST_PROBS)]
        # two trained blocks: the per-token and the probabilities' parts of the one-block rest, scaled apart
        two_rows, two_y = [], []
        for f in base.values():
            t = _terms(f)
            if t["n"] == 2 and t["loss"] <= 0.5 * t["n"] * t["block"]:
                w = 1 / _pa(f)
                token = t["T"] * t["rb"] * (M.BLOCK_REST_H * t["h"] + M.BLOCK_REST_I * t["I"] + M.BLOCK_REST_Q * t["q"])
                two_rows.append([w * token, w * M.BLOCK_REST_PROBS * t["probs"]])
                two_y.append(w * (_pa(f) - 2 * t["block"]))
        if len(two_rows) >= 2:
            tt, tp = _lsq(two_rows, two_y)
            out += [("BLOCK_REST_TWO_BLOCKS (two-block fixtures)", tt, M.BLOCK_REST_TWO_BLOCKS),
                    ("BLOCK_REST_TWO_BLOCKS_PROBS (two-block fixtures)", tp, M.BLOCK_REST_TWO_BLOCKS_PROBS)]

    # 4. full fine-tuning: full − LoRA twin in trained blocks' trainable bytes; at the loss backward per block's
    # bytes (any number of blocks), at a block's backward per min(n, 2) blocks
    at_loss, at_block = [], []
    for name, f in fx.items():
        if ("-full-" in name or name.startswith("full-h")) and not f["setup"]["grad_checkpoint"] \
                and f["setup"]["optimizer"] == "adam":
            # the LoRA twin: same name with lora, or for the full-h512-n* probes the w-h512-…-S512-n* ones
            twin = next((fx[c] for c in (name.replace("-full-", "-lora-"),
                                         name.replace("full-h512-n", "w-h512-I1408-H8-S512-n"))
                         if c in fx and c != name), None)
            if twin:
                spec = spec_from_config(f["config"])
                setup = fixture_setup(f)
                dm = model.dims(spec, setup)
                block = model.resident(spec, setup, dm, frozenset()).block_trainable_bytes
                t = _terms(twin)
                extra = _pa(f) - _pa(twin)
                if t["loss"] > 0.5 * t["n"] * t["block"]:
                    at_loss.append(extra / block)
                elif dm.trained != 2:  # two trained LoRA blocks shrink the twin's rest (BLOCK_REST_TWO_BLOCKS)
                    at_block.append(extra / (block * min(dm.trained, 2)))
    if at_loss:
        out.append(("FULL_GRAD_LOSS (loss-phase twins, per block)", statistics.median(at_loss), M.FULL_GRAD_LOSS))
    if at_block:
        out.append(("FULL_GRAD_BLOCK (block-phase twins, per block ≤ 2)", statistics.median(at_block),
                    M.FULL_GRAD_BLOCK))

    # 4b. Phi-3's fused gate_up: per block (4 blocks − 1) / 3 and the one-block rest against the Llama twins, per
    # token and intermediate unit (fp32 probes)
    p1, p4 = fx.get("phi3-h512-n1"), fx.get("phi3-h512-n4")
    l1, l4 = fx.get("w-h512-I1408-H8-S512-n1"), fx.get("w-h512-I1408-H8-S512-n4")
    if p1 and p4 and l1 and l4:
        t = _terms(l4)
        per_token = t["T"] * 4 * t["I"]
        saved = ((_pa(p4) - _pa(p1)) - (_pa(l4) - _pa(l1))) / 3 / per_token
        rest = ((_pa(p1) - _pa(l1)) / per_token) - saved
        out += [("FUSED_MLP_SAVED (phi3 vs llama probes)", saved, M.FUSED_MLP_SAVED),
                ("FUSED_MLP_REST (phi3 vs llama probes)", rest, M.FUSED_MLP_REST)]

    # 5. the optimizer update (T = 32): the first two blocks, then per further block
    upd = {int(n.split("-n")[1]): f for n, f in fx.items() if re.fullmatch(r"upd-h256-n\d+", n)}
    if upd:
        block = _resident_block(upd[1])
        out.append(("UPDATE_ARRAYS adam (2 blocks)", _pa(upd[2]) / (2 * block), M.UPDATE_ARRAYS["adam"]))
        extra = [(_pa(upd[k]) - _pa(upd[2])) / ((k - 2) * block * M.UPDATE_ARRAYS["adam"]) for k in upd if k > 4]
        out.append(("UPDATE_PER_EXTRA_BLOCK (n > 4)", statistics.mean(extra), M.UPDATE_PER_EXTRA_BLOCK))
    sgd = fx.get("upd-h256-n8-sgd")
    if sgd and upd:
        blocks = M.UPDATE_BLOCKS + M.UPDATE_PER_EXTRA_BLOCK * 6
        out.append(("UPDATE_ARRAYS sgd (8 blocks)", _pa(sgd) / (_resident_block(sgd) * blocks), M.UPDATE_ARRAYS["sgd"]))
    for opt in ("adafactor", "muon"):
        f = fx.get(f"wide-full-T32-{opt}")
        if f:
            out.append((f"UPDATE_ARRAYS {opt} (2 blocks)", _pa(f) / (2 * _resident_block(f)), M.UPDATE_ARRAYS[opt]))

    # 6. quantised and DoRA twins
    qx, dx = [], []
    for name, f in fx.items():
        if "-q4lora-" in name and not f["setup"]["grad_checkpoint"]:
            twin = fx.get(name.replace("-q4lora-", "-lora-"))
            t = _terms(f)
            if twin and t["loss"] > 0.5 * t["n"] * t["block"]:
                qx.append((_pa(f) - _pa(twin)) / (t["n"] * t["probs"]))
        if "-dora-" in name and f["config"]["hidden_size"] >= 1024:  # the weight term is visible at real widths
            twin = fx.get(name.replace("-dora-", "-lora-"))
            if twin:
                spec = spec_from_config(f["config"])
                setup = fixture_setup(f)
                roles = model.adapted_roles(spec, setup)
                t = _terms(f)
                outs = sum(m.out_features * m.count for m in spec.linears if m.role in roles)
                largest = max(m.in_features * m.out_features for m in spec.linears if m.role in roles)
                dx.append((_pa(f) - _pa(twin) - t["n"] * t["T"] * outs * t["b"]) / (4 * largest))
    if qx:
        out.append(("QUANT_EXTRA_PROBS (median, loss-phase twins)", statistics.median(qx), M.QUANT_EXTRA_PROBS))
    if dx:
        out.append(("DORA_ADAPTED_COPIES (real-width DoRA twins)", statistics.median(dx), M.DORA_ADAPTED_COPIES))

    width = max(len(k) for k, *_ in out)
    print(f"{'constant':<{width}}  {'from the fixtures':>18}  {'in mlx_step.py':>14}")
    for key, got, used in out:
        print(f"{key:<{width}}  {got:>18.3f}  {used:>14.3f}")
    return 0


def _resident_block(fx: dict) -> float:
    spec = spec_from_config(fx["config"])
    setup = fixture_setup(fx)
    return model.resident(spec, setup, model.dims(spec, setup), frozenset()).block_trainable_bytes


if __name__ == "__main__":
    sys.exit(main())
