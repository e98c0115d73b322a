"""Trace one training step of TRL 1.16's preference/RL trainers with the tracer (exact/trace.py)
and check GRPO's KV cache against a real CPU ``generate``.

Each step runs TRL's own functions where they run under FakeTensorMode (the fused chunked head
``add_fused_lm_head`` with its GPU allocation pattern, ``selective_log_softmax``, ``use_adapter``,
``disable_gradient_checkpointing``) and otherwise the same tensor operations as the trainer, with the source line
named:

- dpo:    trl/trainer/dpo_trainer.py 1285–1339 (policy forward on chosen+rejected, then the no_grad reference
          forward: the adapter switched off with PEFT, a frozen copy for full fine-tuning), sigmoid loss;
- kto:    trl/trainer/kto_trainer.py 1370–1445 (no_grad KL forward on the policy, policy forward, no_grad KL and
          example forwards on the reference);
- orpo:   trl/experimental/orpo/orpo_trainer.py 745–820 (outputs.logits, cross-entropy on the chosen half,
          get_batch_logps with selective_log_softmax, the odds-ratio loss);
- reward: trl/trainer/reward_trainer.py 778–792 (AutoModelForSequenceClassification, num_labels=1);
- grpo:   trl/trainer/grpo_trainer.py 1498 (the fused head on the completion positions) and the DAPO loss
          (loss_type "dapo", beta 0), one training micro-batch of prompt + completion.

Usage (developer tool, .venv-cal):

    .venv-cal/bin/python -m calibration.trainer_trace            # the matrix, prints measured vs estimate
    .venv-cal/bin/python -m calibration.trainer_trace --json validation/data/trainer_findings.json
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from calibration.trainer_cases import KV_CONFIG, KV_FAMILY, KV_RUNS, estimate_case, kv_estimate, matrix  # noqa: E402
from exact import trace as tr  # noqa: E402

BETA = 0.1


def _ref_context(model, ref_model):
    """The reference forward's context: no_grad, checkpointing off, and the adapter switched off with PEFT."""
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import use_adapter

    stack = contextlib.ExitStack()
    stack.enter_context(torch.no_grad())
    stack.enter_context(disable_gradient_checkpointing(model, {"use_reentrant": False}))
    if ref_model is None:
        stack.enter_context(use_adapter(model, adapter_name=None))
    return stack


class _Call(torch.nn.Module):
    """A fresh parent module for each forward: MemTracker refuses a second top-level call of the same module in
    one step (the policy's reference forward with PEFT, KTO's KL forwards). Holds the model without registering
    it, so it owns no parameters."""

    def __init__(self, model) -> None:
        super().__init__()
        object.__setattr__(self, "inner", model)

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


def _fused(model, ids, labels):
    return _Call(model)(input_ids=ids, labels=labels, use_cache=False, fused_lm_head=True)


def _dpo_loss(model, ref_model, ids, labels):
    outputs = _fused(model, ids, labels)  # dpo_trainer.py 1299
    logps = outputs.log_probs.sum(dim=1)
    del outputs
    chosen, rejected = logps.chunk(2, dim=0)
    with _ref_context(model, ref_model):  # dpo_trainer.py 1327-1338
        ref_out = _fused(ref_model or model, ids, labels)
        ref_logps = ref_out.log_probs.sum(dim=1)
        del ref_out
    ref_c, ref_r = ref_logps.chunk(2, dim=0)
    return -F.logsigmoid(BETA * ((chosen - ref_c) - (rejected - ref_r))).mean()  # loss_type "sigmoid"


def _kto_loss(model, ref_model, ids, labels):
    kl_ids = torch.roll(ids, 1, dims=0)  # mismatched completions (the batch's own, shifted by one)
    with torch.no_grad():  # kto_trainer.py _compute_kl_logps on the policy
        kl_out = _fused(model, kl_ids, kl_ids)
        kl_logps = kl_out.log_probs.sum(-1)
        del kl_out
    outputs = _fused(model, ids, labels)
    logps = outputs.log_probs.sum(-1)
    del outputs
    with _ref_context(model, ref_model):
        ref_kl = _fused(ref_model or model, kl_ids, kl_ids).log_probs.sum(-1)
        ref_logps = _fused(ref_model or model, ids, labels).log_probs.sum(-1)
    kl = (kl_logps - ref_kl).mean().clamp(min=0).detach()
    half = ids.shape[0] // 2  # first half desirable, second half undesirable
    chosen = 1 - torch.sigmoid(BETA * ((logps[:half] - ref_logps[:half]) - kl))
    rejected = 1 - torch.sigmoid(BETA * (kl - (logps[half:] - ref_logps[half:])))
    return torch.cat((chosen, rejected)).mean()


def _orpo_loss(model, ids, labels):
    from trl.trainer.utils import selective_log_softmax

    b = ids.shape[0] // 2
    all_logits = _Call(model)(ids, use_cache=False).logits  # orpo_trainer.py 771-777
    logits = all_logits[:b][..., :-1, :].contiguous()  # cross_entropy_loss on the chosen half (800)
    nll = torch.nn.CrossEntropyLoss()(logits.view(-1, logits.shape[-1]), labels[:b][..., 1:].contiguous().view(-1))
    del logits
    lab = labels[:, 1:].clone()  # get_batch_logps (average_log_prob=True)
    per_token = selective_log_softmax(all_logits[:, :-1, :], lab)
    logps = per_token.sum(-1) / lab.shape[1]
    del all_logits
    c, r = logps[:b].float(), logps[b:].float()
    log_odds = (c - r) - (torch.log1p(-torch.exp(c).clamp(max=1 - 1e-6)) - torch.log1p(-torch.exp(r).clamp(max=1 - 1e-6)))
    return nll - (BETA * F.logsigmoid(log_odds)).mean()


def _reward_loss(model, ids):
    rewards = _Call(model)(input_ids=ids, use_cache=False).logits.squeeze(-1)  # reward_trainer.py 783
    chosen, rejected = torch.chunk(rewards, chunks=2)
    return -F.logsigmoid(chosen - rejected).mean()


def _grpo_loss(model, ids, labels, completion: int):
    labels = labels.clone()
    labels[:, :-completion] = -100  # grpo_trainer.py 1494-1495: only the completion tokens are scored
    out = _fused(model, ids, labels)
    logps = out.log_probs[:, -completion:]
    del out
    old = logps.detach()  # aligned steps: old_per_token_logps is None -> detach (grpo_trainer.py)
    adv = torch.ones(ids.shape[0], 1)
    ratio = torch.exp(logps - old)
    per_token = -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)
    return per_token.sum() / per_token.numel()  # "dapo": normalised by the tokens in the batch


def run_case(case: dict) -> dict:
    """case: family, config, trainer, method, precision, batch (per device), seq_len (GRPO: prompt + completion),
    completion (GRPO). Returns measured peak bytes and where it happened."""
    trainer = case["trainer"]
    setup = {"method": case["method"], "precision": case["precision"], "batch": case["batch"],
             "seq_len": case["seq_len"], "grad_ckpt": True, "attention": "sdpa", "lora_rank": 16,
             "lora_targets": "all-linear", "loss": "standard" if trainer in ("orpo", "reward") else "chunked"}
    full = {"family": case["family"], "config": case["config"], "setup": setup}
    vocab = int(case["config"]["vocab_size"])
    from torch._subclasses.fake_tensor import FakeTensorMode

    with tr.loss_and_offload_ctx(setup):
        if trainer == "reward":
            model = _build_reward(full)
        else:
            model = tr.build_model(full, "meta")
        ref = None
        if case["method"] == "full" and trainer in ("dpo", "kto"):
            ref_setup = dict(setup, grad_ckpt=False)
            ref = tr.build_model({**full, "setup": ref_setup}, "meta")
            ref.eval()
            for p in ref.parameters():
                p.requires_grad_(False)
        groups = tr.tie_groups(model)
        ref_groups = tr.tie_groups(ref) if ref is not None else []
        with tr.real_mode_mask_decisions(), FakeTensorMode(allow_non_fake_inputs=True):
            model.to_empty(device="cpu")
            tr.retie(groups)
            if ref is not None:
                ref.to_empty(device="cpu")
                tr.retie(ref_groups)
            opt = tr.make_optimizer(model, setup)
            tracker = tr.Tracker()
            tracker.track_external(model, opt, *([ref] if ref is not None else []))
            b = case["batch"] * (2 if trainer in ("dpo", "orpo", "reward") else 1)
            with tracker:
                for step in range(2):
                    gc.collect()
                    if step == 1:
                        tracker.reset_mod_stats()
                        tracker.restart_peak()
                    tracker.new_step()
                    ids = torch.randint(0, vocab, (b, case["seq_len"]), dtype=torch.long)
                    labels = ids.clone()
                    with tr.autocast_ctx(setup):
                        if trainer == "dpo":
                            loss = _dpo_loss(model, ref, ids, labels)
                        elif trainer == "kto":
                            loss = _kto_loss(model, ref, ids, labels)
                        elif trainer == "orpo":
                            loss = _orpo_loss(model, ids, labels)
                        elif trainer == "reward":
                            loss = _reward_loss(model, ids)
                        else:
                            loss = _grpo_loss(model, ids, labels, case["completion"])
                    loss.backward()
                    tracker.phase_override = "grad_clip"
                    torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
                    tracker.phase_override = "optimizer_step"
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    tracker.phase_override = None
                    del loss, ids, labels
                peak = tracker.peak_total()
                where = dict(tracker.peak_where)
    return {"peak_bytes": int(peak), "peak_phase": where["phase"], "peak_region": where["region"]}


def _build_reward(full: dict):
    from transformers import AutoModelForSequenceClassification

    setup = full["setup"]
    cfg = tr.hf_config(full)
    cfg.num_labels = 1
    cfg.pad_token_id = 0
    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(cfg, dtype=tr.PRECISION_DTYPE[setup["precision"]],
                                                                attn_implementation="sdpa")
    if setup["method"] == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 lora_dropout=0.0, task_type="SEQ_CLS"))
    tr.enable_grad_ckpt(model)
    model.train()
    return model


def kv_check(family: str, config: dict, sequences: int, prompt: int, completion: int) -> dict:
    """Real CPU generate on a tiny random-weight model: the DynamicCache's bytes at the end vs kv_cache_bytes."""
    from transformers import AutoModelForCausalLM

    cfg = tr.hf_config({"family": family, "config": config})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    ids = torch.randint(0, config["vocab_size"], (sequences, prompt))
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=completion,
                             min_new_tokens=completion, do_sample=True, return_dict_in_generate=True,
                             pad_token_id=0, eos_token_id=None)
    cache = out.past_key_values
    measured = 0
    for layer in cache.layers:
        measured += layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
    est = kv_estimate(sequences, prompt, completion)
    return {"family": family, "sequences": sequences, "prompt": prompt, "completion": completion,
            "cache_len": int(cache.get_seq_length()), "measured_bytes": int(measured), "estimate_bytes": int(est)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--only")
    p.add_argument("--rescore", help="a --json output: recompute the estimates for its traces (no tracing)")
    args = p.parse_args(argv)
    if args.rescore:
        with open(args.rescore, encoding="utf-8") as fh:
            doc = json.load(fh)
        cases = {c["name"]: c for c in matrix()}
        for row in doc["traces"]:
            est, phase = estimate_case(cases[row["name"]])
            row.update(estimate_tensor_bytes=int(est), estimate_peak_phase=phase,
                       error=round(est / row["measured"]["peak_bytes"] - 1, 4))
            print(f"{row['name']:<28} {row['error']:+.1%} ({phase})")
        errs = [abs(r["error"]) for r in doc["traces"]]
        doc["summary"] = {"n": len(errs), "median_abs": statistics.median(errs), "worst_abs": max(errs)}
        print(f"median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%} over {len(errs)} traces")
        with open(args.json or args.rescore, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        return 0
    rows = []
    for case in matrix():
        if args.only and args.only not in case["name"]:
            continue
        t0 = time.perf_counter()
        measured = run_case(case)
        est, phase = estimate_case(case)
        err = est / measured["peak_bytes"] - 1
        rows.append({**{k: case[k] for k in ("name", "trainer", "method", "precision", "batch", "seq_len")},
                     "measured": measured, "estimate_tensor_bytes": int(est), "estimate_peak_phase": phase,
                     "error": round(err, 4)})
        if args.json:  # written after every trace: a long run leaves its partial results
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({"traces": rows}, fh, indent=1)
        print(f"{case['name']:<28} measured {measured['peak_bytes'] / 1e9:7.3f} GB ({measured['peak_phase']}:"
              f"{measured['peak_region']}) estimate {est / 1e9:7.3f} GB ({phase}) {err:+.1%} "
              f"[{time.perf_counter() - t0:.0f} s]", flush=True)
    kv = [kv_check(KV_FAMILY, KV_CONFIG, n, pr, c) for n, pr, c in KV_RUNS]
    for k in kv:
        print(f"KV cache {k}: {k['estimate_bytes'] / k['measured_bytes'] - 1:+.2%}")
    errs = [abs(r["error"]) for r in rows]
    if errs:
        print(f"median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%} over {len(errs)} traces")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"traces": rows, "kv_cache": kv}, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
