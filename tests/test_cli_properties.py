"""Properties of `python -m estimator` over its whole documented flag space (hypothesis, in-process): never a
traceback, exit 0 or 2, exactly one line on stderr (and nothing on stdout) when 2; and for a valid job with
--advice --json, the CLI's advice is advise()'s for the same job. No --exact, no Hub ids (those reach the network)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator import TrainerSetup, advise, get_device, load_preset, parse_targets
from estimator.job.stack import default_settings, resolve_setup
from estimator.options.backends import device_backend
from estimator.options.devices import device_ids
from estimator.options.losses import LOSS_IDS
from estimator.options.methods import ATTENTIONS, METHODS, SHARDINGS
from estimator.options.optimizers import OPTIMIZER_IDS
from estimator.options.precisions import PRECISION_IDS
from estimator.options.stacks import STACK_IDS
from estimator.options.trainers import GENERATION_IDS, TRAINER_IDS, TRAINERS
from estimator.report.cli import main

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "estimator/models/presets/qwen2.5-0.5b.json")
SMALL = ("qwen2.5-0.5b", "llama-3.2-1b", "gemma-3-1b")

# Each flag with valid values and invalid ones (None: the flag is absent; True: a switch given).
FLAGS: dict[str, tuple] = {
    "--stack": (*STACK_IDS, "trll", ""),
    "--method": (*METHODS, "dpo"),
    "--rule": ("seed", "exact"),
    "--precision": (*PRECISION_IDS, "fp8"),
    "--optimizer": (*OPTIMIZER_IDS, "sgd9"),
    "--batch": ("1", "2", "8", "0", "-1", "x", "5000"),
    "--seq-len": ("8", "512", "4096", "0", "x", "99999999"),
    "--image-tokens": ("0", "256", "-1"),
    "--train-tower": (True,),
    "--grad-ckpt": (True,),
    "--no-grad-ckpt": (True,),
    "--offload-activations": (True,),
    "--no-offload-activations": (True,),
    "--attention": (*ATTENTIONS, "flash9"),
    "--loss": (*LOSS_IDS, "mse"),
    "--lora-rank": ("8", "0", "-3", "x"),
    "--lora-targets": ("q_proj,v_proj", "all-linear", ",", "query"),
    "--gpus": ("1", "2", "8", "0"),
    "--sharding": (*SHARDINGS, "zero4"),
    "--offload-optimizer": (True,),
    "--grad-accum": ("1", "4", "0"),
    "--compile": (True,),
    "--optimizer-in-bwd": (True,),
    "--trainer": (*TRAINER_IDS, "ppo"),
    "--precompute-ref": (True,),
    "--beta": ("0", "0.1", "-1", "nan"),
    "--num-generations": ("2", "4", "8", "1"),
    "--prompt-len": ("64", "512", "0"),
    "--completion-len": ("64", "512", "0"),
    "--generation": (*GENERATION_IDS, "tgi"),
    "--vllm-gpu-util": ("0.3", "0.5", "1.5"),
    "--vllm-sleep": (True,),
    "--device": ("rtx-4090", "h100-80gb", "laptop-36gb", "t4", "24gb", "4080", "A6000", "h100", "tpu", "custom"),
    "--capacity": ("20", "0.1", "x"),
    "--unified": (True,),
    "--advice": (True,),
    "--json": (True,),
}
MODELS = st.one_of(
    st.tuples(st.just("--model"), st.sampled_from((*SMALL, "mixtral-8x7b", "gemma-3-4b", "llama-3-8b", "gpt-9"))),
    st.tuples(st.just("--size"), st.sampled_from(("0.5", "7", "nan", "-1", "x"))),
    st.tuples(st.just("--config"), st.sampled_from((CONFIG, "/nonexistent/config.json"))),
)


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # a traceback: the property's failure
            raise AssertionError(f"{' '.join(argv)} raised {type(exc).__name__}: {exc}") from exc
    return rc, out.getvalue(), err.getvalue()


@st.composite
def any_flags(draw) -> list[str]:
    """A model flag (or none) and a handful of flags, each with a valid or an invalid value; now and then a list."""
    argv: list[str] = []
    if draw(st.integers(0, 9)):
        argv += list(draw(MODELS))
    for flag in draw(st.lists(st.sampled_from(sorted(FLAGS)), max_size=7, unique=True)):
        value = draw(st.sampled_from(FLAGS[flag]))
        argv += [flag] if value is True else [flag, value]
    if draw(st.integers(0, 29)) == 0:
        argv.append(draw(st.sampled_from(("--list-presets", "--list-devices", "--help"))))
    return argv


def check_exit(argv: list[str]) -> tuple[int, str]:
    rc, out, err = run(argv)
    assert rc in (0, 2), (argv, rc, err)
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("estimator: error: "), (argv, err)
        assert out == "", argv
    else:
        assert err == "", (argv, err)
    return rc, out


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(any_flags())
def test_any_flags_exit_0_or_2_with_one_line(argv):
    check_exit(argv)


@st.composite
def advice_jobs(draw) -> dict:
    """A job that is mostly valid: a small preset, a trainer with its own flags, a catalog device."""
    trainer = draw(st.sampled_from(TRAINER_IDS))
    job = {"model": draw(st.sampled_from(SMALL)), "stack": draw(st.sampled_from(("trl", "unsloth", "axolotl"))),
           "method": draw(st.sampled_from(METHODS)), "trainer": trainer,
           "device": draw(st.sampled_from(("rtx-4090", "t4", "h100-80gb", "mac-16gb", "h200"))),
           "batch": draw(st.sampled_from((None, 1, 2, 4, 8))), "gpus": draw(st.sampled_from((1, 1, 2))),
           "sharding": draw(st.sampled_from(("none", "zero3")))}
    if TRAINERS[trainer].generates:
        job["num_generations"] = draw(st.sampled_from((None, 2, 4)))
        job["generation"] = draw(st.sampled_from((None, *GENERATION_IDS)))
    else:
        job["seq_len"] = draw(st.sampled_from((None, 8, 1024, 4096)))
    if trainer == "sft":
        job["rule"] = draw(st.sampled_from((None, None, "seed")))
    return job


def job_argv(job: dict) -> list[str]:
    argv = ["--model", job["model"], "--stack", job["stack"], "--method", job["method"], "--trainer", job["trainer"],
            "--device", job["device"], "--gpus", str(job["gpus"]), "--sharding", job["sharding"], "--advice", "--json"]
    for key, flag in (("batch", "--batch"), ("seq_len", "--seq-len"), ("num_generations", "--num-generations"),
                      ("generation", "--generation"), ("rule", "--rule")):
        if job.get(key) is not None:
            argv += [flag, str(job[key])]
    return argv


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(advice_jobs())
def test_cli_advice_is_advise(job):
    argv = job_argv(job)
    rc, out = check_exit(argv)
    if rc != 0:
        return  # a refused combination (TRL's checks): one line, checked above
    got = json.loads(out)["advice"]
    tr = TrainerSetup(job["trainer"], num_generations=job.get("num_generations"), generation=job.get("generation"))
    batch = job["batch"] if job["batch"] is not None else default_settings(job["stack"], trainer=job["trainer"]).batch
    setup = resolve_setup(job["stack"], method=job["method"], batch=batch, seq_len=job.get("seq_len") or 2048,
                          lora_rank=16, lora_targets=parse_targets("all-linear"), gpus=job["gpus"],
                          sharding=job["sharding"], backend=device_backend(get_device(job["device"])))
    want = advise(load_preset(job["model"]), setup, get_device(job["device"]), tr, rule=job.get("rule"))
    assert [(r["key"], r["saves_bytes"], r["applicable"]) for r in got["remedies"]] == \
        [(r.key, int(round(r.saves_bytes)), r.applicable) for r in want.remedies]
    assert got["max_batch"] == want.max_batch
    assert got["max_completion_len" if tr.option.generates else "max_seq_len"] == want.max_length
    assert got["smallest_device"] == (want.smallest_device.id if want.smallest_device else None)
    assert got["smallest_device"] is None or got["smallest_device"] in device_ids()
