"""estimator.report.snippets: each stack's script, config or command parses and carries exactly the estimate's
assumptions. Settings are read back from the text (Python AST, the YAML values, the shell words) and compared with
the setup and the option descriptions the estimate reads (estimator.options); whatever a stack cannot express
must be said in a comment."""

from __future__ import annotations

import ast
import itertools
import json
import shlex
from dataclasses import replace

import pytest

from estimator import TrainingSetup, generic_spec, load_preset, parse_config_text
from estimator.job.stack import loss_impl_id, resolve_setup
from estimator.options.methods import METHODS
from estimator.options.optimizers import OPTIMIZERS
from estimator.options.precisions import PRECISIONS
from estimator.options.stacks import MLX_STACK, STACKS
from estimator.report.snippets import training_snippet
from estimator.report.snippets.common import PLACEHOLDER_MODEL_ID, snippet_language

LLAMA = load_preset("llama-3.1-8b")
LLAMA_REPO = "meta-llama/Llama-3.1-8B"
PYTHON_STACKS = ("trl", "trainer", "unsloth", "plain")
# The PyTorch stacks, whose scripts this file reads back; mlx_lm lora's YAML is read back in tests/test_mlx.py.
TORCH_STACKS = tuple(s for s in STACKS if s != MLX_STACK)
HF_OPTIM_STACKS = ("trl", "trainer", "unsloth", "axolotl", "llamafactory", "swift")  # named by transformers' optim
ALL_LINEAR_NAMES = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})

# The stacks that build the optimizer themselves name it by class (stated here, not read from the module).
TORCH_CLASSES = {
    "adamw": ("torch.optim.AdamW", {"fused": True}),
    "adamw_foreach": ("torch.optim.AdamW", {"foreach": True}),
    "adamw_8bit": ("bitsandbytes.optim.AdamW8bit", {}),
    "paged_adamw": ("bitsandbytes.optim.PagedAdamW32bit", {}),
    "paged_adamw_8bit": ("bitsandbytes.optim.PagedAdamW8bit", {}),
    "sgd": ("torch.optim.SGD", {"momentum": 0.9}),
    "adafactor": ("transformers.optimization.Adafactor",
                  {"scale_parameter": False, "relative_step": False, "warmup_init": False}),
    "lion": ("bitsandbytes.optim.Lion32bit", {}),
}
TORCHTUNE_DTYPE = {"bf16": "bf16", "fp16": "bf16", "mixed": "fp32", "fp32": "fp32"}
LITGPT_PRECISION = {"bf16": "bf16-true", "fp16": "16-true", "mixed": "bf16-mixed", "fp32": "32-true"}


# --- reading a snippet back ------------------------------------------------------------------------------

def comments(text: str) -> str:
    """The comment text as one line (wrapped notes joined), for phrase checks."""
    parts = [line.lstrip().lstrip("#").strip() for line in text.splitlines() if line.lstrip().startswith("#")]
    return " ".join(" ".join(parts).split())


def code(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def calls(source: str) -> dict[str, list[dict[str, object]]]:
    """Keyword arguments of every call by its dotted callee (SFTConfig, AutoModelForCausalLM.from_pretrained…),
    literals evaluated, anything else as source text."""
    out: dict[str, list[dict[str, object]]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            kwargs = {}
            for kw in node.keywords:
                try:
                    kwargs[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    kwargs[kw.arg] = ast.unparse(kw.value)
            out.setdefault(ast.unparse(node.func), []).append(kwargs)
    return out


def one(found: dict[str, list[dict[str, object]]], name: str) -> dict[str, object]:
    assert len(found.get(name, [])) == 1, f"expected one call of {name}, got {found.get(name)}"
    return found[name][0]


def assignments(source: str) -> dict[str, object]:
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                out[node.targets[0].id] = ast.unparse(node.value)
    return out


def yaml_doc(text: str) -> dict[str, object]:
    """The snippet's YAML: top-level `key: value` lines, every value in JSON syntax (a subset of YAML)."""
    doc: dict[str, object] = {}
    for line in code(text).splitlines():
        if not line.strip():
            continue
        assert not line[0].isspace(), f"unexpected nesting: {line!r}"
        key, sep, value = line.partition(": ")
        assert sep and key.replace("_", "").isalnum(), line
        assert key not in doc, f"duplicate key {key}"
        doc[key] = json.loads(value)
    return doc


def words(text: str) -> list[str]:
    """The snippet's shell command as words; it must be exactly one command."""
    lines = code(text).splitlines()
    joined = " ".join(line[:-1] if line.endswith("\\") else line for line in lines if line.strip())
    assert all(line.endswith("\\") for line in lines[:-1] if line.strip()), "every line but the last continues"
    tokens = shlex.split(joined)
    assert not {";", "&&", "||", "|", "&"} & set(tokens)
    return tokens


def swift_options(tokens: list[str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """`VAR=value … swift sft --key value…`: the environment and each option's words (a list takes several)."""
    start = tokens.index("swift")
    env = dict(t.split("=", 1) for t in tokens[:start])
    assert tokens[start + 1] == "sft" and all("=" in t for t in tokens[:start])
    options: dict[str, list[str]] = {}
    for token in tokens[start + 2:]:
        if token.startswith("--"):
            assert token[2:] not in options, token
            options[token[2:]] = []
        else:
            options[list(options)[-1]].append(token)
    return env, options


def torchtune_overrides(tokens: list[str]) -> tuple[str, str, dict[str, str], set[str]]:
    assert tokens[:2] == ["tune", "run"] and tokens[3] == "--config"
    overrides, removed = {}, set()
    for token in tokens[5:]:
        if token.startswith("~"):
            removed.add(token[1:])
        else:
            key, _, value = token.partition("=")
            assert key not in overrides
            overrides[key] = value
    return tokens[2], tokens[4], overrides, removed


def litgpt_options(tokens: list[str]) -> tuple[str, str, dict[str, str]]:
    assert tokens[0] == "litgpt"
    options = {}
    rest = tokens[3:]
    assert len(rest) % 2 == 0
    for flag, value in zip(rest[::2], rest[1::2], strict=True):
        assert flag.startswith("--") and flag not in options
        options[flag] = value
    return tokens[1], tokens[2], options


def parses(text: str, setup: TrainingSetup) -> None:
    language = snippet_language(setup)
    if language == "python":
        compile(text, "snippet.py", "exec")
    elif language == "yaml":
        yaml_doc(text)
    else:
        assert language == "bash"
        words(text)


# --- what the snippet says, normalised across stacks -----------------------------------------------------

def _switch_targets(flags: dict[str, bool]) -> frozenset[str]:
    names = {name for name in ("q_proj", "k_proj", "v_proj", "o_proj") if flags[name]}
    if flags["mlp"]:
        names |= {"gate_proj", "up_proj", "down_proj"}
    if flags["lm_head"]:
        names.add("lm_head")
    return frozenset(names)


def extract(stack: str, text: str) -> dict[str, object]:
    """batch, max length, accumulation, checkpointing and offload, optimizer, precision, LoRA, QLoRA, the loss
    marker and clipping, as the snippet states them."""
    s: dict[str, object] = {}
    if stack in ("trl", "trainer", "unsloth"):
        c = calls(text)
        args = one(c, {"trl": "SFTConfig", "unsloth": "SFTConfig", "trainer": "TrainingArguments"}[stack])
        s["batch"], s["accum"] = args["per_device_train_batch_size"], args["gradient_accumulation_steps"]
        s["optimizer"] = (args["optim"], args.get("optim_args"))
        s["clip"] = args["max_grad_norm"]
        s["flags"] = (args["bf16"], args["fp16"])
        s["deepspeed"] = args.get("deepspeed")
        if stack == "trl":
            s["max_len"] = args["max_length"]
            s["ckpt"], s["offload"] = args["gradient_checkpointing"], args.get("activation_offloading", False)
            trainer = one(c, "SFTTrainer")
            s["loss"] = "hf" if trainer.get("compute_loss_func") == "full_logits_loss" else "trl"
            if s["loss"] == "hf":
                assert "ForCausalLMLoss(logits, labels" in text and "logits = outputs.logits" in text
            assert "loss_type" not in args and "use_liger_kernel" not in args
        elif stack == "trainer":
            (tok,) = [k for k in c["tokenizer"] if "max_length" in k]
            assert tok["padding"] == "max_length" and tok["truncation"] is True
            s["max_len"] = tok["max_length"]
            s["ckpt"] = args["activation_checkpointing"]
            s["offload"] = bool(args.get("activation_checkpointing_kwargs", {}).get("offload"))
            if s["ckpt"]:
                assert args["activation_checkpointing_kwargs"]["use_reentrant"] is False
            s["loss"] = "liger" if args.get("use_liger_kernel") else "hf"
        else:
            load = one(c, "FastLanguageModel.from_pretrained")
            s["max_len"] = args["max_length"]
            assert load["max_seq_length"] == args["max_length"]
            gc = load["use_gradient_checkpointing"]
            s["ckpt"], s["offload"] = gc in ("unsloth", True), gc == "unsloth"
            if "FastLanguageModel.get_peft_model" in c:
                assert one(c, "FastLanguageModel.get_peft_model")["use_gradient_checkpointing"] == gc
            assert "gradient_checkpointing" not in args  # Unsloth's own setting rules
            env = 'os.environ["UNSLOTH_RETURN_LOGITS"] = "1"'
            s["loss"] = "unsloth_ce" if env in text else "cce"
            if env in text:
                assert text.index(env) < text.index("from unsloth import")
            s["unsloth_load"] = {k: load.get(k) for k in ("load_in_4bit", "load_in_16bit", "full_finetuning")}
            s["dtype"] = load["dtype"]
            assert "offload_embedding" not in load  # Unsloth's default ("auto"), which the estimate follows
    if stack in ("trl", "trainer", "plain"):
        c = calls(text)
        load = one(c, "AutoModelForCausalLM.from_pretrained")
        s["dtype"], s["attention"] = load["dtype"], load["attn_implementation"]
        if "BitsAndBytesConfig" in c:
            bnb = one(c, "BitsAndBytesConfig")
            assert (bnb["load_in_4bit"], bnb["bnb_4bit_quant_type"]) == (True, "nf4")
            assert load["quantization_config"] == "bnb_config"
            s["qlora"] = {"double_quant": bnb["bnb_4bit_use_double_quant"],
                          "compute": bnb["bnb_4bit_compute_dtype"]}
            s["quant_storage"] = bnb.get("bnb_4bit_quant_storage")
        else:
            assert "quantization_config" not in load
            s["qlora"] = None
        prep = "peft" if "prepare_model_for_kbit_training" in c else "none"
        if 'skip in name for skip in ("embed_tokens", "lm_head")' in text:
            prep = "norms" if prep == "none" else "both"
        s["prep"] = prep
        s["kbit"] = one(c, "prepare_model_for_kbit_training") if prep == "peft" else None
    if stack in ("trl", "trainer", "plain", "unsloth"):
        c = calls(text)
        lora_call = "FastLanguageModel.get_peft_model" if stack == "unsloth" else "LoraConfig"
        if lora_call in c:
            lc = one(c, lora_call)
            assert lc["lora_dropout"] == 0.0
            s["lora"] = (lc["r"], lc["lora_alpha"], lc["target_modules"])
        else:
            s["lora"] = None
        if stack == "trl":
            assert ("peft_config" in one(c, "SFTTrainer")) == (s["lora"] is not None)
        if stack in ("trainer", "plain"):
            assert ("get_peft_model" in c) == (s["lora"] is not None)
            s["adapter_cast"] = "param.data = param.data.to(torch.bfloat16)" in text
    if stack == "plain":
        c = calls(text)
        a = assignments(text)
        s["batch"], s["max_len"], s["accum"] = a["BATCH_SIZE"], a["MAX_LENGTH"], a["GRAD_ACCUM"]
        assert 'padding="max_length"' in text
        ckpt = c.get("model.activation_checkpointing_enable", [])
        s["ckpt"] = bool(ckpt)
        s["offload"] = bool(ckpt) and one(c, "model.activation_checkpointing_enable")["offload"]
        (opt_call,) = [name for name in c if name.endswith(
            ("AdamW", "SGD", "AdamW8bit", "PagedAdamW32bit", "PagedAdamW8bit", "Adafactor", "Lion32bit"))]
        imported = {alias.name: node.module for node in ast.walk(ast.parse(text))
                    if isinstance(node, ast.ImportFrom) for alias in node.names}
        full_name = opt_call if "." in opt_call else f"{imported[opt_call]}.{opt_call}"
        kwargs = dict(one(c, opt_call))
        kwargs.pop("lr")
        s["optimizer"] = (full_name, kwargs)
        autocast = one(c, "torch.autocast")
        s["autocast"] = (autocast["dtype"], autocast["enabled"])
        clip = c.get("torch.nn.utils.clip_grad_norm_", [])
        s["clip"] = one(c, "torch.nn.utils.clip_grad_norm_")["max_norm"] if clip else 0.0
        assert "loss = model(**batch).loss" in text
        s["loss"] = "hf"
    if stack == "axolotl":
        doc = yaml_doc(text)
        s["doc"] = doc
        s["batch"], s["max_len"], s["accum"] = doc["micro_batch_size"], doc["sequence_len"], \
            doc["gradient_accumulation_steps"]
        s["ckpt"] = doc["gradient_checkpointing"]
        s["offload"] = doc.get("activation_offloading") == "hidden_states"
        if s["ckpt"]:
            assert doc["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
        s["optimizer"] = (doc["optimizer"], doc.get("optim_args"))
        s["flags"] = (doc["bf16"], doc["fp16"])
        s["clip"] = doc["max_grad_norm"]
        s["attention"] = doc["attn_implementation"]
        liger = doc.get("liger_fused_linear_cross_entropy") is True
        assert liger == (doc.get("plugins") == ["axolotl.integrations.liger.LigerPlugin"])
        s["loss"] = "liger" if liger else "hf"
        if "adapter" in doc:
            targets = "all-linear" if doc.get("lora_target_linear") else doc["lora_target_modules"]
            assert doc["lora_dropout"] == 0.0
            s["lora"] = (doc["lora_r"], doc["lora_alpha"], targets)
        else:
            s["lora"] = None
        if doc.get("load_in_4bit"):
            assert doc["adapter"] == "qlora"
            s["qlora"] = {"double_quant": doc["bnb_config_kwargs"]["bnb_4bit_use_double_quant"], "compute": None}
        else:
            assert doc.get("adapter") in (None, "lora") and "bnb_config_kwargs" not in doc
            s["qlora"] = None
    if stack == "llamafactory":
        doc = yaml_doc(text)
        s["doc"] = doc
        s["batch"], s["max_len"], s["accum"] = doc["per_device_train_batch_size"], doc["cutoff_len"], \
            doc["gradient_accumulation_steps"]
        assert (doc["stage"], doc["do_train"]) == ("sft", True)
        s["ckpt"] = not doc["disable_gradient_checkpointing"]
        s["offload"] = doc.get("use_unsloth_gc", False)
        s["optimizer"] = (doc["optim"], doc.get("optim_args"))
        s["flags"] = (doc["bf16"], doc["fp16"], doc.get("pure_bf16", False))
        s["clip"] = doc["max_grad_norm"]
        s["attention"] = {"sdpa": "sdpa", "disabled": "eager"}[doc["flash_attn"]]
        s["loss"] = "liger" if doc.get("enable_liger_kernel") else "hf"
        if doc["finetuning_type"] == "lora":
            assert doc["lora_dropout"] == 0.0
            targets = "all-linear" if doc["lora_target"] == "all" else doc["lora_target"].split(",")
            s["lora"] = (doc["lora_rank"], doc["lora_alpha"], targets)
        else:
            assert doc["finetuning_type"] == "full" and "lora_rank" not in doc
            s["lora"] = None
        if "quantization_bit" in doc:
            assert (doc["quantization_bit"], doc["quantization_method"], doc["quantization_type"]) == (4, "bnb", "nf4")
            s["qlora"] = {"double_quant": doc["double_quantization"], "compute": None}
        else:
            s["qlora"] = None
        s["prep"] = "norms" if doc.get("upcast_layernorm") else "none"
    if stack == "swift":
        env, opts = swift_options(words(text))
        one_ = {k: v[0] for k, v in opts.items() if len(v) == 1}
        bools = {"true": True, "false": False}
        s["env"], s["opts"] = env, opts
        s["batch"], s["max_len"] = int(one_["per_device_train_batch_size"]), int(one_["max_length"])
        s["accum"] = int(one_["gradient_accumulation_steps"])
        s["ckpt"] = bools[one_["gradient_checkpointing"]]
        s["optimizer"] = (one_["optim"], one_.get("optim_args"))
        s["clip"] = float(one_["max_grad_norm"])
        s["dtype"] = one_["torch_dtype"]
        s["flags"] = (bools[one_["bf16"]], bools[one_["fp16"]])
        s["attention"] = one_["attn_impl"]
        s["loss"] = "liger" if one_.get("use_liger_kernel") == "true" else "hf"
        if one_["tuner_type"] == "lora":
            assert float(one_["lora_dropout"]) == STACKS["swift"].lora_dropout == 0.05  # its default, counted
            targets = opts["target_modules"]
            s["lora"] = (int(one_["lora_rank"]), int(one_["lora_alpha"]),
                         "all-linear" if targets == ["all-linear"] else targets)
            s["adapter_dtype"] = {"bfloat16": "bf16", None: "fp32"}[one_.get("lora_dtype")]
        else:
            assert one_["tuner_type"] == "full" and "lora_rank" not in opts
            s["lora"] = None
        if "quant_bits" in opts:
            assert (one_["quant_method"], one_["quant_bits"], one_["bnb_4bit_quant_type"]) == ("bnb", "4", "nf4")
            s["qlora"] = {"double_quant": bools[one_["bnb_4bit_use_double_quant"]],
                          "compute": one_["bnb_4bit_compute_dtype"]}
        else:
            s["qlora"] = None
        s["deepspeed"] = one_.get("deepspeed")
    if stack == "torchtune":
        recipe, config, ov, removed = torchtune_overrides(words(text))
        s["recipe"], s["config"], s["removed"] = recipe, config, removed
        s["batch"], s["max_len"] = int(ov["batch_size"]), int(ov["tokenizer.max_seq_len"])
        s["accum"] = int(ov["gradient_accumulation_steps"])
        s["ckpt"] = {"True": True, "False": False}[ov["enable_activation_checkpointing"]]
        s["offload"] = {"True": True, "False": False}[ov["enable_activation_offloading"]]
        s["dtype"] = ov["dtype"]
        opt_kwargs = {k.split(".", 1)[1]: v for k, v in ov.items() if k.startswith("optimizer.")}
        s["optimizer"] = (ov["optimizer"], opt_kwargs)
        s["clip"] = 0.0 if ov["clip_grad_norm"] == "None" else float(ov["clip_grad_norm"])
        s["loss"] = {"torchtune.modules.loss.CEWithChunkedOutputLoss": "torchtune",
                     "torch.nn.CrossEntropyLoss": "torchtune_full"}[ov["loss"]]
        s["in_bwd"] = ov.get("optimizer_in_bwd")
        s["compile"] = ov.get("compile")
        if "model.lora_rank" in ov:
            attn = ov["model.lora_attn_modules"].strip("[]").split(",")
            names = {"q_proj": "q_proj" in attn, "k_proj": "k_proj" in attn, "v_proj": "v_proj" in attn,
                     "o_proj": "output_proj" in attn, "mlp": ov["model.apply_lora_to_mlp"] == "True",
                     "lm_head": ov["model.apply_lora_to_output"] == "True"}
            assert set(attn) - {""} <= {"q_proj", "k_proj", "v_proj", "output_proj"}
            assert ov["model.lora_dropout"] == "0.0"
            s["lora"] = (int(ov["model.lora_rank"]), int(ov["model.lora_alpha"]), _switch_targets(names))
        else:
            s["lora"] = None
    if stack == "litgpt":
        command, checkpoint, opts = litgpt_options(words(text))
        s["command"], s["checkpoint"], s["opts"] = command, checkpoint, opts
        s["batch"], s["max_len"] = int(opts["--train.micro_batch_size"]), int(opts["--train.max_seq_length"])
        s["global_batch"], s["devices"] = int(opts["--train.global_batch_size"]), int(opts["--devices"])
        s["precision"] = opts["--precision"]
        optimizer = opts["--optimizer"]
        if optimizer.startswith("{"):
            spec = json.loads(optimizer)
            kwargs = dict(spec["init_args"])
            kwargs.pop("lr")
            s["optimizer"] = (spec["class_path"], kwargs)
        else:
            s["optimizer"] = (f"torch.optim.{optimizer}", {"foreach": True})  # torch's default
        if "--lora_r" in opts:
            flags = {"q_proj": opts["--lora_query"], "k_proj": opts["--lora_key"], "v_proj": opts["--lora_value"],
                     "o_proj": opts["--lora_projection"], "mlp": opts["--lora_mlp"], "lm_head": opts["--lora_head"]}
            assert set(flags.values()) <= {"true", "false"}
            # LitGPT's own default dropout, which the estimate counts (masks and copies, activations.litgpt_layer)
            assert float(opts["--lora_dropout"]) == STACKS["litgpt"].lora_dropout == 0.05
            s["lora"] = (int(opts["--lora_r"]), int(opts["--lora_alpha"]),
                         _switch_targets({k: v == "true" for k, v in flags.items()}))
        else:
            s["lora"] = None
        s["qlora"] = {"quantize": opts["--quantize"]} if "--quantize" in opts else None
        s["loss"] = "litgpt"  # LitGPT always runs its chunked cross-entropy
    return s


# --- what the estimate assumed, in the stack's terms -----------------------------------------------------

def expected_targets(stack: str, setup: TrainingSetup) -> object:
    if stack in ("torchtune", "litgpt"):
        if setup.lora_targets == ("all-linear",):
            return ALL_LINEAR_NAMES
        names = set(setup.lora_targets) & (ALL_LINEAR_NAMES | {"lm_head"})
        if not {"gate_proj", "up_proj", "down_proj"} <= names:
            names -= {"gate_proj", "up_proj", "down_proj"}  # a partial MLP cannot be expressed (noted)
        return frozenset(names)
    return "all-linear" if setup.lora_targets == ("all-linear",) else list(setup.lora_targets)


def check(stack: str, setup: TrainingSetup, text: str) -> None:
    """Every setting the snippet states equals the estimate's assumption; what it cannot state is noted."""
    parses(text, setup)
    s = extract(stack, text)
    notes = comments(text)
    precision = PRECISIONS[setup.precision]
    lora, qlora = setup.method != "full", setup.method == "qlora"

    # Header: stack, version, micro-batch × max length.
    assert STACKS[stack].version in notes
    assert f"micro-batch {setup.batch} × max length {setup.seq_len:,} tokens" in notes

    # Shape of one step.
    assert (s["batch"], s["max_len"]) == (setup.batch, setup.seq_len)
    if stack == "litgpt":
        assert s["global_batch"] == setup.batch * setup.grad_accum * setup.gpus and s["devices"] == setup.gpus
    else:
        assert s["accum"] == setup.grad_accum

    # Checkpointing and offloading.
    if stack == "litgpt":
        assert "checkpointing" not in " ".join(s["opts"])
        assert ("LitGPT's finetune scripts checkpoint only under FSDP" in notes) == (setup.grad_ckpt != (
            setup.gpus > 1))
        assert ("activation offloading: LitGPT 0.5.13 has none" in notes) == setup.offload_activations
    elif stack == "swift":  # swift sft offloads activations only through an FSDP config's activation_cpu_offload
        assert s["ckpt"] == setup.grad_ckpt
        assert ("activation_cpu_offload" in notes) == setup.offload_activations
    else:
        assert (s["ckpt"], s["offload"]) == (setup.grad_ckpt, setup.offload_activations)

    # Optimizer.
    option = OPTIMIZERS[setup.optimizer]
    if stack in HF_OPTIM_STACKS:
        assert s["optimizer"] == (option.hf_optim, "momentum=0.9" if setup.optimizer == "sgd" else None)
    elif stack == "torchtune":
        cls, kwargs = TORCH_CLASSES[setup.optimizer]
        tt_kwargs = {k: str(v) for k, v in kwargs.items()}
        if setup.optimizer == "adamw_foreach":
            tt_kwargs["fused"] = "False"  # the LoRA configs say fused: True
        assert s["optimizer"] == (cls, tt_kwargs)
        base_fused = lora or s["config"].startswith("qwen2_5/0.5B_full")
        assert s["removed"] == ({"optimizer.fused"} if base_fused and "fused" not in tt_kwargs else set())
        assert s["in_bwd"] == (str(setup.optimizer_in_bwd) if setup.method == "full" else None)
        assert s["compile"] == str(setup.compile)
    elif stack == "litgpt":
        assert s["optimizer"] == TORCH_CLASSES[setup.optimizer]
        assert ("always builds bitsandbytes' PagedAdamW" in notes) == (qlora and setup.optimizer != "paged_adamw")
    else:  # plain
        assert s["optimizer"] == TORCH_CLASSES[setup.optimizer]

    # Precision.
    if stack in ("trl", "trainer", "unsloth"):
        assert s["dtype"] == f"torch.{precision.model_dtype}"
        assert s["flags"] == (precision.bf16_flag, precision.fp16_flag)
    elif stack == "swift":  # torch_dtype is the weights' dtype, bf16/fp16 the autocast (model_args.py:130-142)
        assert s["dtype"] == precision.model_dtype
        assert s["flags"] == (precision.bf16_flag, precision.fp16_flag)
        assert ("refuses to unscale fp16 gradients" in notes) == (setup.method == "full" and setup.precision == "fp16")
    elif stack == "plain":
        assert s["dtype"] == f"torch.{precision.model_dtype}"
        assert s["autocast"] == (f"torch.{precision.compute_dtype}", setup.autocast)
    elif stack == "axolotl":
        assert s["flags"] == (precision.bf16_flag, precision.fp16_flag)
        assert ("Axolotl loads the model in bf16" in notes) == (setup.precision == "mixed")
    elif stack == "llamafactory":  # fp32 trained weights unless pure_bf16 (model/adapter.py:313-325)
        pure = setup.method == "full" and setup.precision == "bf16" and setup.sharding != "zero3"
        assert s["flags"] == (setup.precision in ("bf16", "mixed"), setup.precision == "fp16", pure)
        assert ("no pure fp16" in notes) == (setup.method == "full" and setup.precision == "fp16")
        assert ("loads the base in the checkpoint's dtype" in notes) == (lora and setup.precision in ("mixed",
                                                                                                       "fp32"))
    elif stack == "torchtune":
        assert s["dtype"] == TORCHTUNE_DTYPE[setup.precision]
        assert ("torchtune has no autocast" in notes) == (setup.precision == "mixed")
    else:
        mixed_qlora = qlora and setup.precision == "mixed"
        assert s["precision"] == ("bf16-true" if mixed_qlora else LITGPT_PRECISION[setup.precision])
        assert ("LitGPT refuses the combination" in notes) == mixed_qlora
    if stack in ("trl", "trainer", "plain", "axolotl", "llamafactory", "swift"):
        assert s["attention"] == setup.attention

    # LoRA.
    if lora:
        assert s["lora"] == (setup.lora_rank, 2 * setup.lora_rank, expected_targets(stack, setup))
    else:
        assert s["lora"] is None
    if stack in ("trainer", "plain"):
        assert s["adapter_cast"] == (lora and setup.adapter_dtype == "bf16")
    if stack == "llamafactory":  # PEFT keeps LoRA adapters fp32 and no LLaMA-Factory key casts them
        assert ("keeps them fp32" in notes) == (lora and setup.adapter_dtype == "bf16")
    if stack == "swift" and lora:  # lora_dtype bfloat16 stops PEFT's fp32 upcast (tuners/peft.py:147-160)
        assert s["adapter_dtype"] == setup.adapter_dtype

    # QLoRA: 4-bit, double quantisation, compute dtype, preparation.
    if stack in ("trl", "trainer", "plain", "axolotl", "litgpt", "llamafactory", "swift"):
        assert (s["qlora"] is not None) == qlora
    if qlora:
        if stack in ("trl", "trainer", "plain"):
            assert s["qlora"] == {"double_quant": setup.nf4_double_quant,
                                  "compute": f"torch.{precision.compute_dtype}"}
            assert s["prep"] == setup.qlora_prep  # prepare_model_for_kbit_training present iff "peft"
            if setup.qlora_prep == "peft":
                assert s["kbit"]["use_gradient_checkpointing"] is setup.grad_ckpt
        elif stack == "axolotl":
            assert s["qlora"]["double_quant"] == setup.nf4_double_quant
            assert ("no key keeps them fp32" in notes) == (setup.qlora_prep != "none")
        elif stack == "litgpt":
            assert s["qlora"] == {"quantize": "bnb.nf4-dq" if setup.nf4_double_quant else "bnb.nf4"}
        elif stack == "llamafactory":
            assert s["qlora"]["double_quant"] == setup.nf4_double_quant
            assert s["prep"] == ("norms" if setup.qlora_prep == "norms" else "none")
            assert ("never calls prepare_model_for_kbit_training" in notes) == (setup.qlora_prep == "peft")
        elif stack == "swift":
            assert s["qlora"] == {"double_quant": setup.nf4_double_quant, "compute": precision.compute_dtype}
            assert ("never calls prepare_model_for_kbit_training" in notes) == (setup.qlora_prep != "none")
        elif stack == "unsloth":
            assert ("Unsloth keeps embeddings and norms in 16-bit" in notes) == (setup.qlora_prep != "none")
            assert ("always double-quantises" in notes) == (not setup.nf4_double_quant)
        elif stack == "torchtune":
            assert "qlora" in s["config"]
            assert ("torchtune keeps norms and embeddings" in notes) == (setup.qlora_prep != "none")
    elif stack in ("trl", "trainer", "plain"):
        assert s["prep"] == "none" and "prepare_model_for_kbit_training" not in code(text)
    if stack == "unsloth":
        assert s["unsloth_load"] == {"load_in_4bit": qlora, "load_in_16bit": True if setup.method == "lora" else None,
                                     "full_finetuning": True if setup.method == "full" else None}

    # Loss: the implementation the estimate counts for this stack and loss kind.
    assert s["loss"] == loss_impl_id(setup)

    # Gradient clipping.
    if stack == "litgpt":
        assert ("reject train.max_norm" in notes) == (setup.max_grad_norm > 0)
    else:
        assert s["clip"] == setup.max_grad_norm


def cases() -> list[tuple[str, dict[str, object]]]:
    """Every stack × method × a few option variations (the stack's own values for the rest)."""
    out = []
    for stack, method in itertools.product(TORCH_STACKS, METHODS):
        base = {"method": method, "batch": 3, "seq_len": 1536}
        variants = [
            {},
            {"grad_ckpt": False},
            {"grad_ckpt": True, "offload_activations": False},
            {"grad_ckpt": True, "offload_activations": True},
            {"optimizer": "adamw"}, {"optimizer": "adamw_8bit"}, {"optimizer": "adamw_foreach"},
            {"lora_rank": 8, "lora_targets": ("q_proj", "v_proj")},
            {"lora_rank": 64, "lora_targets": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                               "down_proj")},
            {"precision": "bf16"}, {"precision": "mixed"},
            {"grad_accum": 4, "max_grad_norm": 0.5},
            {"max_grad_norm": 0.0},
            {"attention": "eager"},
        ]
        variants += [{"loss": loss} for loss in STACKS[stack].loss_impls]
        if method == "qlora":
            variants += [{"qlora_prep": prep} for prep in ("none", "peft", "norms")]
            variants += [{"nf4_double_quant": False}, {"nf4_double_quant": True}]
        if method != "full":
            variants += [{"adapter_dtype": "bf16"}, {"adapter_dtype": "fp32"}]
        for variant in variants:
            out.append((stack, {**base, **variant}))
    return out


CASES = cases()


@pytest.mark.parametrize(("stack", "settings"), CASES,
                         ids=[f"{s}-{'-'.join(f'{k}={v}' for k, v in kw.items() if k not in ('batch', 'seq_len'))}"
                              for s, kw in CASES])
def test_snippet_settings_match_the_estimate(stack, settings):
    setup = resolve_setup(stack, **settings)
    check(stack, setup, training_snippet(LLAMA, setup))


@pytest.mark.parametrize(("stack", "method"), list(itertools.product(TORCH_STACKS, METHODS)))
def test_every_optimizer_and_precision_parses_and_matches(stack, method):
    torch_optimizers = [k for k, o in OPTIMIZERS.items() if not o.mlx_only]  # adam, muon: mlx-lm's own
    for optimizer, precision in itertools.product(torch_optimizers, PRECISIONS):
        setup = resolve_setup(stack, method=method, optimizer=optimizer, precision=precision)
        check(stack, setup, training_snippet(LLAMA, setup))


@pytest.mark.parametrize("stack", list(TORCH_STACKS))
def test_multi_gpu_sharding(stack):
    setup = resolve_setup(stack, method="full", gpus=8, sharding="zero3", offload_optimizer=True)
    text = training_snippet(LLAMA, setup)
    check(stack, setup, text)
    if stack in ("trl", "trainer"):
        ds = one(calls(text), {"trl": "SFTConfig", "trainer": "TrainingArguments"}[stack])["deepspeed"]
        assert ds["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu"}}
        assert "accelerate launch --num_processes 8" in text
        zero1 = resolve_setup(stack, method="full", gpus=2, sharding="zero1")
        args = one(calls(training_snippet(LLAMA, zero1)), {"trl": "SFTConfig", "trainer": "TrainingArguments"}[stack])
        assert args["deepspeed"]["zero_optimization"] == {"stage": 1}
        single = one(calls(training_snippet(LLAMA, resolve_setup(stack))),
                     {"trl": "SFTConfig", "trainer": "TrainingArguments"}[stack])
        assert "deepspeed" not in single
    elif stack == "axolotl":
        doc = yaml_doc(text)
        assert doc["deepspeed"]["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu"}}
        assert "accelerate launch --num_processes 8" in comments(text)
        assert "deepspeed" not in yaml_doc(training_snippet(LLAMA, resolve_setup(stack)))
    elif stack == "litgpt":
        assert "--devices" in words(text) and "optimizer offload" in comments(text)
    elif stack == "swift":  # no shipped config offloads the optimizer without the parameters: the JSON itself
        s = extract(stack, text)
        assert json.loads(s["deepspeed"])["zero_optimization"] == {"stage": 3, "offload_optimizer": {
            "device": "cpu", "pin_memory": True}}
        assert s["env"] == {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "NPROC_PER_NODE": "8"}
        assert extract(stack, training_snippet(LLAMA, resolve_setup(stack)))["env"] == {"CUDA_VISIBLE_DEVICES": "0"}
        both = resolve_setup(stack, method="full", gpus=16, sharding="zero3", offload_optimizer=True,
                             offload_params=True)
        s = extract(stack, training_snippet(LLAMA, both))
        assert s["deepspeed"] == "zero3_offload" and s["env"]["NNODES"] == "2" and s["env"]["NPROC_PER_NODE"] == "8"
    elif stack == "llamafactory":
        zero = yaml_doc(text)["deepspeed"]["zero_optimization"]
        assert zero == {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}
        assert "Run with: NPROC_PER_NODE=8 llamafactory-cli train" in comments(text)
        assert "deepspeed" not in yaml_doc(training_snippet(LLAMA, resolve_setup(stack)))
    else:  # the stack has no ZeRO setting: said, not dropped
        assert "8 GPUs" in comments(text) and "Not expressible" in comments(text)


def test_qlora_under_zero3_stores_4bit_weights_in_the_model_dtype():
    for stack in ("trl", "trainer"):
        c = calls(training_snippet(LLAMA, resolve_setup(stack, method="qlora", gpus=4, sharding="zero3")))
        assert one(c, "BitsAndBytesConfig")["bnb_4bit_quant_storage"] == "torch.bfloat16"


def test_trl_checkpointing_reentrancy_for_peft_under_zero3():
    args = one(calls(training_snippet(LLAMA, resolve_setup("trl", gpus=4, sharding="zero3"))), "SFTConfig")
    assert args["gradient_checkpointing_kwargs"] == {"use_reentrant": True}
    args = one(calls(training_snippet(LLAMA, resolve_setup("trl", method="full", gpus=4, sharding="zero3"))),
               "SFTConfig")
    assert args["gradient_checkpointing_kwargs"] == {"use_reentrant": False}


def test_trl_defaults_concretely():
    """TRL's own defaults, stated as literals: fused chunked head, checkpointing, fused AdamW, no QLoRA upcast."""
    text = training_snippet(LLAMA, resolve_setup("trl", method="qlora", batch=4, seq_len=4096, lora_rank=32))
    c = calls(text)
    args = one(c, "SFTConfig")
    assert (args["per_device_train_batch_size"], args["max_length"]) == (4, 4096)
    assert args["gradient_checkpointing"] is True and "activation_offloading" not in args
    assert args["optim"] == "adamw_torch_fused" and (args["bf16"], args["fp16"]) == (True, False)
    assert "loss_type" not in args and "compute_loss_func" not in one(c, "SFTTrainer")
    assert one(c, "BitsAndBytesConfig") == {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                                            "bnb_4bit_use_double_quant": False,  # ModelConfig.use_bnb_nested_quant
                                            "bnb_4bit_compute_dtype": "torch.bfloat16"}
    assert "prepare_model_for_kbit_training" not in code(text)
    assert one(c, "LoraConfig") == {"r": 32, "lora_alpha": 64, "lora_dropout": 0.0, "target_modules": "all-linear",
                                     "task_type": "CAUSAL_LM"}
    assert assignments(text)["model_id"] == LLAMA_REPO


def test_trainer_offload_and_liger_concretely():
    setup = resolve_setup("trainer", method="lora", grad_ckpt=True, offload_activations=True, loss="fused")
    args = one(calls(training_snippet(LLAMA, setup)), "TrainingArguments")
    assert args["activation_checkpointing"] is True
    assert args["activation_checkpointing_kwargs"] == {"use_reentrant": False, "offload": True}
    assert args["use_liger_kernel"] is True
    qlora = training_snippet(LLAMA, resolve_setup("trainer", method="qlora"))
    assert one(calls(qlora), "prepare_model_for_kbit_training") == {"use_gradient_checkpointing": False}


def test_unsloth_checkpointing_modes():
    for settings, mode in (({}, "unsloth"), ({"grad_ckpt": True, "offload_activations": False}, True),
                           ({"grad_ckpt": False}, False)):
        c = calls(training_snippet(LLAMA, resolve_setup("unsloth", **settings)))
        assert one(c, "FastLanguageModel.get_peft_model")["use_gradient_checkpointing"] == mode
    full = calls(training_snippet(LLAMA, resolve_setup("unsloth", method="full")))
    assert one(full, "FastLanguageModel.from_pretrained")["full_finetuning"] is True
    assert "FastLanguageModel.get_peft_model" not in full


def test_torchtune_config_names():
    def config(spec, method):
        return torchtune_overrides(words(training_snippet(spec, resolve_setup("torchtune", method=method))))[:2]

    assert config(LLAMA, "lora") == ("lora_finetune_single_device", "llama3_1/8B_lora_single_device")
    assert config(LLAMA, "qlora") == ("lora_finetune_single_device", "llama3_1/8B_qlora_single_device")
    assert config(LLAMA, "full") == ("full_finetune_single_device", "llama3_1/8B_full_single_device")
    assert config(load_preset("qwen2.5-0.5b"), "full")[1] == "qwen2_5/0.5B_full_single_device"
    assert config(load_preset("gemma-2-2b"), "qlora")[1] == "gemma2/2B_qlora_single_device"
    qwen_qlora = training_snippet(load_preset("qwen2.5-7b"), resolve_setup("torchtune", method="qlora"))
    assert torchtune_overrides(words(qwen_qlora))[1] == "./your_model_qlora_single_device.yaml"
    assert "ships no single-device qlora config" in comments(qwen_qlora)
    assert "tune cp llama3_1/8B_qlora_single_device" in comments(qwen_qlora)


def test_litgpt_concretely():
    text = training_snippet(LLAMA, resolve_setup("litgpt", method="qlora", batch=2, seq_len=512, grad_accum=3))
    command, checkpoint, opts = litgpt_options(words(text))
    assert (command, checkpoint) == ("finetune_lora", LLAMA_REPO)
    assert opts["--quantize"] == "bnb.nf4"  # LitGPT's bnb.nf4: no double quantisation
    assert opts["--precision"] == "bf16-true" and opts["--train.global_batch_size"] == "6"
    assert litgpt_options(words(training_snippet(LLAMA, resolve_setup("litgpt", method="full"))))[0] == "finetune_full"


def test_swift_defaults_concretely():
    """ms-swift's swift sft with its own defaults: rank 8 on every linear, checkpointing, fused AdamW, bf16 weights with
    bf16 autocast; the dropout and accumulation ms-swift would pick (0.05, ceil(16 / batch)) written out as counted;
    one visible GPU (more would split the model, device_map 'auto')."""
    text = training_snippet(LLAMA, resolve_setup("swift", method="qlora", batch=2, seq_len=4096))
    env, opts = swift_options(words(text))
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert {k: v for k, v in opts.items() if k not in ("dataset", "learning_rate", "output_dir")} == {
        "model": [LLAMA_REPO], "torch_dtype": ["bfloat16"], "bf16": ["true"], "fp16": ["false"], "attn_impl": ["sdpa"],
        "tuner_type": ["lora"], "lora_rank": ["8"], "lora_alpha": ["16"], "lora_dropout": ["0.05"],
        "target_modules": ["all-linear"], "quant_method": ["bnb"], "quant_bits": ["4"], "bnb_4bit_quant_type": ["nf4"],
        "bnb_4bit_use_double_quant": ["true"], "bnb_4bit_compute_dtype": ["bfloat16"],
        "gradient_checkpointing": ["true"], "max_length": ["4096"], "per_device_train_batch_size": ["2"],
        "gradient_accumulation_steps": ["1"], "optim": ["adamw_torch_fused"], "max_grad_norm": ["1.0"]}
    assert "ceil(16 / (batch × GPUs))" in comments(text)
    names = swift_options(words(training_snippet(LLAMA, resolve_setup("swift", lora_targets=("q_proj", "v_proj")))))
    assert names[1]["target_modules"] == ["q_proj", "v_proj"]


def test_partial_mlp_targets_are_noted_not_dropped():
    setup = resolve_setup("torchtune", lora_targets=("q_proj", "gate_proj"))
    text = training_snippet(LLAMA, setup)
    check("torchtune", setup, text)
    assert "LoRA targets gate_proj: torchtune adapts the whole MLP or none of it" in comments(text)
    setup = resolve_setup("litgpt", lora_targets=("q_proj", "c_attn"))
    text = training_snippet(LLAMA, setup)
    assert "LoRA targets c_attn: LitGPT has no switch for them" in comments(text)


@pytest.mark.parametrize("stack", list(TORCH_STACKS))
def test_sgd_gets_the_momentum_buffer_the_estimate_counts(stack):
    """transformers' optim="sgd" builds torch SGD with momentum 0 (no state); the estimate counts one buffer."""
    s = extract(stack, training_snippet(LLAMA, resolve_setup(stack, method="full", optimizer="sgd")))
    momentum = {"trl": ("sgd", "momentum=0.9"), "trainer": ("sgd", "momentum=0.9"),
                "unsloth": ("sgd", "momentum=0.9"), "axolotl": ("sgd", "momentum=0.9"),
                "torchtune": ("torch.optim.SGD", {"momentum": "0.9"}), "litgpt": ("torch.optim.SGD", {"momentum": 0.9}),
                "plain": ("torch.optim.SGD", {"momentum": 0.9}), "llamafactory": ("sgd", "momentum=0.9"),
                "swift": ("sgd", "momentum=0.9")}
    assert s["optimizer"] == momentum[stack]


def test_stack_none_is_the_trainer_script_and_languages():
    setup = TrainingSetup(method="qlora", batch=4, seq_len=4096, grad_ckpt=True)
    assert snippet_language(setup) == "python"
    text = training_snippet(LLAMA, setup)
    check("trainer", setup, text)
    assert "per_device_train_batch_size=4" in text and "max_length=4096" in text
    assert {stack: snippet_language(resolve_setup(stack)) for stack in STACKS} == {
        "trl": "python", "trainer": "python", "unsloth": "python", "axolotl": "yaml", "torchtune": "bash",
        "litgpt": "bash", "plain": "python", "mlx": "yaml", "llamafactory": "yaml", "swift": "bash"}


@pytest.mark.parametrize("stack", list(TORCH_STACKS))
def test_models_without_a_hub_id_get_a_placeholder_and_hostile_names_stay_in_comments(stack):
    setup = resolve_setup(stack)
    placeholder = training_snippet(generic_spec(7), setup)
    parses(placeholder, setup)
    # torchtune names the model through its config: a clearly labelled config to copy stands in for it.
    assert (PLACEHOLDER_MODEL_ID if stack != "torchtune" else "./your_model_lora_single_device.yaml") in code(
        placeholder)
    if stack in PYTHON_STACKS:
        assert assignments(placeholder)["model_id"] == PLACEHOLDER_MODEL_ID
    spec = parse_config_text(LLAMA_CONFIG_TEXT, name='evil"\nimport os; os.system("x")  #\\')
    text = training_snippet(spec, setup)
    parses(text, setup)
    assert "os.system" not in code(text)


def test_yaml_parses_with_pyyaml_when_installed():
    yaml = pytest.importorskip("yaml")
    for method in METHODS:
        text = training_snippet(LLAMA, resolve_setup("axolotl", method=method, loss="fused", gpus=2,
                                                     sharding="zero2", offload_activations=True, grad_ckpt=True))
        assert yaml.safe_load(text) == yaml_doc(text)


LLAMA_CONFIG_TEXT = """{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 2,
"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000}"""


@pytest.mark.parametrize("stack", sorted(TORCH_STACKS))
def test_a_hub_model_loads_its_own_repo_id(stack):
    """A model fetched from the Hub by id is loaded by that id (its revision goes to from_pretrained separately);
    an uploaded config keeps the placeholder."""
    base = load_preset("qwen2.5-0.5b")
    setup = resolve_setup(stack, method="lora")
    hub = replace(base, name="acme/qwen-sft@v2", source="hub")
    text = training_snippet(hub, setup)
    assert PLACEHOLDER_MODEL_ID not in text and "acme/qwen-sft@v2" not in code(text)
    if stack != "torchtune":  # torchtune names its model through a copied config, not a Hub id
        assert "acme/qwen-sft" in code(text)
    uploaded = replace(base, name="my config", source="config.json")
    assert "acme/qwen-sft" not in training_snippet(uploaded, setup)
    if stack != "torchtune":
        assert PLACEHOLDER_MODEL_ID in training_snippet(uploaded, setup)


@pytest.mark.parametrize("stack", ["trl", "trainer", "plain"])
def test_multimodal_snippets_keep_the_tower_as_the_estimate_does(stack):
    """A wrapper's tower is frozen and without adapters in the default estimate: PEFT's all-linear would wrap its
    linears and TRL trains every parameter unless told, so the scripts exclude and freeze it; --train-tower not."""
    import re

    from estimator.job.trainer import TrainerSetup
    from estimator.models.spec import TOWER_MODULES
    from estimator.report.snippets.trainers import trainer_snippet

    gemma = load_preset("gemma-3-4b")
    lora = resolve_setup(stack, method="lora")
    full = resolve_setup(stack, method="full")
    text = training_snippet(gemma, lora)
    parses(text, lora)
    assert f'exclude_modules=r"{TOWER_MODULES}"' in text and "requires_grad_(False)" not in text
    text = training_snippet(gemma, full)
    parses(text, full)
    assert "requires_grad_(False)" in text and "exclude_modules" not in text
    # the pattern catches Gemma 3's tower and projector parameters, not the language model's
    assert re.fullmatch(TOWER_MODULES, "model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight")
    assert re.fullmatch(TOWER_MODULES, "model.multi_modal_projector.mm_input_projection_weight")
    assert not re.fullmatch(TOWER_MODULES, "model.language_model.layers.0.self_attn.q_proj.weight")
    trained = replace(lora, train_tower=True)
    assert "exclude_modules" not in training_snippet(gemma, trained)
    assert "requires_grad_(False)" not in training_snippet(gemma, replace(full, train_tower=True))
    assert "exclude_modules" not in training_snippet(LLAMA, lora)
    assert "requires_grad_(False)" not in training_snippet(LLAMA, full)
    if stack == "trl":
        dpo = trainer_snippet(gemma, lora, TrainerSetup("dpo"))
        assert "exclude_modules" in dpo
        compile(dpo, "dpo.py", "exec")
