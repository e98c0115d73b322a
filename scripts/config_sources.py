"""Write what the config importer and exporter read from each project's released source, at the version the stack
models: the key lists the importer checks against (estimator/job/configs/keys/*.txt: every key the project's config
schema knows, so a key it deliberately ignores or cannot model is told from a typo), and torchtune's shipped
single-device recipe configs the torchtune export starts from (estimator/report/configs/torchtune_bases.json).
Read from the released sources, not from docs:

    python scripts/config_sources.py --axolotl DIR --torchtune DIR --litgpt DIR --trl-python PY --mlx-lm DIR \
        --llamafactory DIR --llamafactory-transformers DIR --swift DIR --swift-transformers DIR

- Axolotl 0.19.0 (DIR = the unpacked wheel): the fields (and aliases) of AxolotlInputConfig and its bases in
  axolotl/utils/schemas/*.py, plus the plugin arguments in axolotl/integrations/*/args.py (plugins merge them into
  the top level of the YAML);
- TRL 1.16.0 + transformers 5.24 (PY = a Python with both installed, e.g. /work/venvs/cal/bin/python): the
  dataclass fields of every TrlParser the `trl <command> --config` commands build (ScriptArguments, the trainer
  configs, ModelConfig, DatasetMixtureConfig, GRPOScriptArguments) and the experimental ORPO/CPO configs, plus
  accelerate's launch arguments (a TRL config may carry them: `num_processes: 4`, trl/cli/commands/training.py);
- torchtune 0.6.1 (DIR = the unpacked wheel): the top-level keys of every shipped recipe config
  (recipes/configs/**/*.yaml) and the `cfg.<key>` / `cfg.get("<key>")` the recipes read;
- LitGPT 0.5.13 (DIR = the unpacked wheel): the parameters of litgpt/finetune/{lora,full,adapter,adapter_v2}.py
  setup() and, dotted, the fields of the TrainArgs/EvalArgs/LogArgs dataclasses (litgpt/args.py);
- mlx-lm 0.32.2 (DIR = the folder holding the installed or unpacked `mlx_lm` package, e.g.
  /work/venvs/mlx/lib/python3.11/site-packages): the keys of mlx_lm/lora.py's CONFIG_DEFAULTS and the dests of its
  argparse flags (`mlx_lm.lora --config` merges the YAML into the flags' namespace), the dataset keys
  tuner/datasets.py reads from that namespace (getattr(args|config, "<key>")), and, dotted, the keys read from the
  nested blocks: lora_parameters (tuner/utils.py linear_to_lora_layers config["<key>"] / config.get), lr_schedule
  (tuner/utils.py build_schedule), optimizer_config's optimizer names (CONFIG_DEFAULTS) and hf_dataset's records
  (tuner/datasets.py load_custom_hf_dataset ds["<key>"] / ds.get).
- LLaMA-Factory 0.9.5 (DIR = the repository at tag v0.9.5, e.g. `git archive v0.9.5 src | tar -x`; the transformers
  DIR = the unpacked transformers 5.6.0 wheel, the newest release its pyproject.toml allows): the init fields of the
  dataclasses `llamafactory-cli train` parses (hparams/parser.py _TRAIN_ARGS: ModelArguments, DataArguments,
  TrainingArguments, FinetuningArguments, GeneratingArguments, with their bases in hparams/*.py), TrainingArguments'
  bases being transformers' Seq2SeqTrainingArguments and TrainingArguments (training_args_seq2seq.py,
  training_args.py). `init=False` fields (ModelArguments.compute_dtype, device_map, model_max_length,
  block_diag_attn) are derived, not keys of the YAML.
- ms-swift 4.6.0 (DIR = the unpacked sdist or the repository at the release, holding swift/; the transformers DIR = the
  unpacked transformers 5.19.0 wheel, the newest release its requirements/framework.txt allows): the init fields of
  the dataclasses `swift sft` parses (swift/arguments/sft_args.py SftArguments with its bases in swift/arguments/,
  swift/trainers/arguments.py and swift/ray_utils/arguments.py; swift's Seq2SeqTrainingArguments extends
  transformers' Seq2SeqTrainingArguments), plus ENV (the environment block swift/cli/main.py:53 pops) →
  keys/swift.txt; the keys only `swift rlhf` parses (rlhf_args.py RLHFArguments and its bases, swift/rlhf_trainers/
  args_mixin.py) → keys/swift_rlhf.txt; the keys only `megatron sft` / `megatron rlhf` parse (swift/megatron/
  arguments/ MegatronSftArguments, MegatronRLHFArguments and their bases) → keys/swift_megatron.txt, so a preference
  or Megatron config's own keys are told from typos.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "estimator" / "job" / "configs" / "keys"
BASES = Path(__file__).resolve().parents[1] / "estimator" / "report" / "configs" / "torchtune_bases.json"
# The torchtune config families the export starts from (report/snippets/common.py TORCHTUNE_CONFIGS' prefixes).
TORCHTUNE_PREFIXES = ("llama3_2/1B", "llama3_2/3B", "llama3_1/8B", "qwen2_5/0.5B", "qwen2_5/1.5B", "qwen2_5/3B",
                      "qwen2_5/7B", "qwen2_5/14B", "gemma/7B", "gemma2/2B", "gemma2/9B")
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _numbers(node: object) -> object:
    """YAML 1.1 (PyYAML) reads 3e-4 as a string; OmegaConf (torchtune) reads it as a float: keep it a number."""
    if isinstance(node, dict):
        return {k: _numbers(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_numbers(v) for v in node]
    if isinstance(node, str) and _FLOAT.fullmatch(node):
        return float(node)
    return node


def _write(name: str, header: str, keys: set[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    lines = [f"# {line}" for line in header.splitlines()] + sorted(keys)
    (OUT / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{name}: {len(keys)} keys")


def _class_fields(tree: ast.Module) -> dict[str, tuple[list[str], set[str]]]:
    """class name → (base names, annotated field names and Field(alias=...) names)."""
    out: dict[str, tuple[list[str], set[str]]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        names: set[str] = set()
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                if item.target.id != "model_config":
                    names.add(item.target.id)
                if isinstance(item.value, ast.Call):
                    for kw in item.value.keywords:
                        if kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                            names.add(str(kw.value.value))
        out[node.name] = ([b.id for b in node.bases if isinstance(b, ast.Name)], names)
    return out


def axolotl(root: Path) -> None:
    classes: dict[str, tuple[list[str], set[str]]] = {}
    for path in sorted((root / "axolotl" / "utils" / "schemas").glob("*.py")):
        classes.update(_class_fields(ast.parse(path.read_text())))
    keys: set[str] = set()
    todo, seen = ["AxolotlInputConfig"], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in classes:
            continue
        seen.add(name)
        bases, fields = classes[name]
        keys |= fields
        todo += bases
    for path in sorted((root / "axolotl" / "integrations").glob("*/args.py")):
        for _bases, fields in _class_fields(ast.parse(path.read_text())).values():
            keys |= fields
    _write("axolotl", "Axolotl 0.19.0: AxolotlInputConfig (axolotl/utils/schemas/*.py) and the plugin arguments\n"
                      "(axolotl/integrations/*/args.py). Written by scripts/config_sources.py.", keys)


TRL_PROBE = r"""
import dataclasses, json
from accelerate.commands.launch import launch_command_parser
from trl import (DatasetMixtureConfig, DPOConfig, GRPOConfig, KTOConfig, ModelConfig, RewardConfig, RLOOConfig,
                 ScriptArguments, SFTConfig)
from trl.scripts.grpo import GRPOScriptArguments
classes = [DatasetMixtureConfig, DPOConfig, GRPOConfig, KTOConfig, ModelConfig, RewardConfig, RLOOConfig,
           ScriptArguments, SFTConfig, GRPOScriptArguments]
try:
    from trl.experimental.orpo import ORPOConfig
    from trl.experimental.cpo import CPOConfig
    classes += [ORPOConfig, CPOConfig]
except ImportError:
    pass
keys = {f.name for c in classes for f in dataclasses.fields(c)}
launch = {a.dest for a in launch_command_parser()._actions if a.dest not in ("help", "training_script",
                                                                               "training_script_args")}
print(json.dumps({"keys": sorted(keys), "launch": sorted(launch)}))
"""


def trl(python: str) -> None:
    data = json.loads(subprocess.run([python, "-c", TRL_PROBE], check=True, capture_output=True, text=True).stdout)
    keys = set(data["keys"]) | set(data["launch"]) | {"accelerate_config", "env"}
    _write("trl", "TRL 1.16.0 + transformers 5.24: the dataclass fields of the TrlParser of every trl <command>\n"
                  "(trl/scripts/*.py make_parser), the experimental ORPO/CPO configs, accelerate 1.15's launch\n"
                  "arguments, accelerate_config and env (trl/cli). Written by scripts/config_sources.py.", keys)


def torchtune(root: Path) -> None:
    import yaml

    keys: set[str] = set()
    for path in sorted((root / "recipes" / "configs").rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict):
            keys |= {str(k) for k in doc}
    pattern = re.compile(r"cfg\.get\(\s*\"([a-z_0-9]+)\"|cfg\.([a-z_][a-z_0-9]*)\b")
    for path in sorted((root / "recipes").glob("*.py")):
        for a, b in pattern.findall(path.read_text()):
            keys.add(a or b)
    keys.discard("get")
    bases = {}
    for prefix in TORCHTUNE_PREFIXES:
        for method in ("full", "lora", "qlora"):
            path = root / "recipes" / "configs" / f"{prefix}_{method}_single_device.yaml"
            if path.exists():
                bases[f"{prefix}_{method}"] = _numbers(yaml.safe_load(path.read_text()))
    BASES.parent.mkdir(parents=True, exist_ok=True)
    BASES.write_text(json.dumps({"source": "torchtune 0.6.1 recipes/configs/<family>/<size>_<method>_single_device"
                                           ".yaml (scripts/config_sources.py)", "configs": bases}, indent=1) + "\n")
    print(f"torchtune bases: {len(bases)} configs")
    _write("torchtune", "torchtune 0.6.1: the top-level keys of every shipped recipe config (recipes/configs) and\n"
                        "the keys the recipes read (recipes/*.py cfg.<key>, cfg.get). Written by scripts/config_sources.py.",
           keys)


def litgpt(root: Path) -> None:
    keys: set[str] = set()
    for name in ("lora", "full", "adapter", "adapter_v2"):
        tree = ast.parse((root / "litgpt" / "finetune" / f"{name}.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "setup":
                keys |= {a.arg for a in node.args.args + node.args.kwonlyargs}
    classes = _class_fields(ast.parse((root / "litgpt" / "args.py").read_text()))
    for prefix, cls in (("train", "TrainArgs"), ("eval", "EvalArgs"), ("log", "LogArgs")):
        keys |= {f"{prefix}.{f}" for f in classes.get(cls, ([], set()))[1]}
    keys |= {"data.class_path", "data.init_args", "optimizer.class_path", "optimizer.init_args"}
    _write("litgpt", "LitGPT 0.5.13: the setup() parameters of litgpt/finetune/{lora,full,adapter,adapter_v2}.py and,\n"
                     "dotted, TrainArgs/EvalArgs/LogArgs (litgpt/args.py). Written by scripts/config_sources.py.", keys)


def _read_keys(tree: ast.AST, names: tuple[str, ...]) -> set[str]:
    """String keys read from a mapping or namespace called one of `names`: x["k"], x.get("k"), getattr(x, "k")."""
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names and \
                isinstance(node.ctx, ast.Load):  # read, not written (ds["mask_prompt"] = ... is mlx-lm's own)
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                keys.add(node.slice.value)
        elif isinstance(node, ast.Call) and node.args:
            func, args = node.func, node.args
            if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name) and \
                    func.value.id in names and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                keys.add(args[0].value)
            elif isinstance(func, ast.Name) and func.id == "getattr" and len(args) >= 2 and \
                    isinstance(args[0], ast.Name) and args[0].id in names and \
                    isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
                keys.add(args[1].value)
    return keys


def mlx_lm(root: Path) -> None:
    package = root / "mlx_lm"
    lora = ast.parse((package / "lora.py").read_text())
    keys: set[str] = set()
    for node in ast.walk(lora):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CONFIG_DEFAULTS"
                                                for t in node.targets) and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant):
                    keys.add(str(key.value))
                    if key.value in ("optimizer_config", "lora_parameters") and isinstance(value, ast.Dict):
                        keys |= {f"{key.value}.{k.value}" for k in value.keys if isinstance(k, ast.Constant)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
            if flags:
                keys.add(flags[0][2:].replace("-", "_"))
    datasets = ast.parse((package / "tuner" / "datasets.py").read_text())
    read = _read_keys(datasets, ("args", "config"))  # a local or Hub dataset reads them from the flags' namespace,
    keys |= read  # an hf_dataset record from its own (load_custom_hf_dataset: SimpleNamespace(**ds))
    keys |= {f"hf_dataset.{k}" for k in _read_keys(datasets, ("ds",)) | (read - {"hf_dataset", "train", "test", "data", "mask_prompt"})}
    utils = {f.name: f for f in ast.parse((package / "tuner" / "utils.py").read_text()).body
             if isinstance(f, ast.FunctionDef)}
    keys |= {f"lora_parameters.{k}" for k in _read_keys(utils["linear_to_lora_layers"], ("config",))}
    keys |= {f"lr_schedule.{k}" for k in _read_keys(utils["build_schedule"], ("schedule_config",))}
    version = re.search(r"__version__ = ['\"]([^'\"]+)", (package / "_version.py").read_text())
    _write("mlx_lm", f"mlx-lm {version.group(1) if version else '?'}: mlx_lm/lora.py CONFIG_DEFAULTS and its argparse "
                     "flags' dests, the\nkeys tuner/datasets.py reads from them and, dotted, the nested blocks' keys "
                     "(tuner/utils.py,\ntuner/datasets.py). Written by scripts/config_sources.py.", keys)


def _dataclass_fields(paths: list[Path]) -> dict[str, tuple[list[str], set[str]]]:
    """class name → (base names, its init fields): the annotated class-body names, less `field(init=False)` ones and
    ClassVar annotations (what HfArgumentParser turns into arguments)."""
    out: dict[str, tuple[list[str], set[str]]] = {}
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            names: set[str] = set()
            for item in node.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                    continue
                if "ClassVar" in ast.unparse(item.annotation):
                    continue
                init = not (isinstance(item.value, ast.Call) and any(
                    kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
                    for kw in item.value.keywords))
                if init:
                    names.add(item.target.id)
            out[node.name] = ([b.id for b in node.bases if isinstance(b, ast.Name)], names)
    return out


# hparams/parser.py _TRAIN_ARGS (LLaMA-Factory 0.9.5) and the base its TrainingArguments takes without USE_MCA
# (hparams/training_args.py: BaseTrainingArguments = transformers' Seq2SeqTrainingArguments).
LLAMAFACTORY_TRAIN_ARGS = ("ModelArguments", "DataArguments", "TrainingArguments", "FinetuningArguments",
                           "GeneratingArguments")


def llamafactory(root: Path, transformers_root: Path) -> None:
    hparams = root / "src" / "llamafactory" / "hparams"
    ours = _dataclass_fields(sorted(hparams.glob("*.py")))
    theirs = _dataclass_fields([transformers_root / "transformers" / "training_args.py",
                                transformers_root / "transformers" / "training_args_seq2seq.py"])
    keys: set[str] = set()
    # (namespace, class): LLaMA-Factory's classes, then transformers' from BaseTrainingArguments on (both name a
    # TrainingArguments)
    todo, seen = [("lf", name) for name in LLAMAFACTORY_TRAIN_ARGS], set()
    while todo:
        where, name = todo.pop()
        if (where, name) in seen:
            continue
        seen.add((where, name))
        if where == "lf" and name == "BaseTrainingArguments":
            where, name = "tf", "Seq2SeqTrainingArguments"
        bases, fields = (ours if where == "lf" else theirs).get(name, ([], set()))
        keys |= fields
        todo += [(where, b) for b in bases]
    version = re.search(r"VERSION = ['\"]([^'\"]+)", (root / "src" / "llamafactory" / "extras" / "env.py").read_text())
    tf_version = re.search(r"__version__ = ['\"]([^'\"]+)", (transformers_root / "transformers" / "__init__.py")
                           .read_text())
    _write("llamafactory", f"LLaMA-Factory {version.group(1) if version else '?'}: the init fields of the dataclasses "
                           "llamafactory-cli train parses\n(hparams/parser.py _TRAIN_ARGS, their bases in hparams/*.py) "
                           "and transformers "
                           f"{tf_version.group(1) if tf_version else '?'}'s\nSeq2SeqTrainingArguments / "
                           "TrainingArguments (training_args*.py). Written by scripts/config_sources.py.", keys)


# The roots of `swift sft` (swift/cli/sft.py), `swift rlhf` (swift/cli/rlhf.py) and `megatron sft` / `megatron rlhf`
# (swift/cli/_megatron/); a base imported under another name is transformers' class (swift/trainers/arguments.py:7-8).
SWIFT_ROOTS = ("SftArguments",)
SWIFT_RLHF_ROOTS = ("RLHFArguments",)
SWIFT_MEGATRON_ROOTS = ("MegatronSftArguments", "MegatronRLHFArguments")
SWIFT_ALIASES = {"HfSeq2SeqTrainingArguments": "Seq2SeqTrainingArguments", "HfTrainingArguments": "TrainingArguments"}


def _swift_keys(ours: dict[str, tuple[list[str], set[str]]], theirs: dict[str, tuple[list[str], set[str]]],
                roots: tuple[str, ...]) -> set[str]:
    keys: set[str] = set()
    todo, seen = [("swift", name) for name in roots], set()
    while todo:
        where, name = todo.pop()
        if (where, name) in seen:
            continue
        seen.add((where, name))
        if where == "swift" and name in SWIFT_ALIASES:
            where, name = "tf", SWIFT_ALIASES[name]
        table = ours if where == "swift" else theirs
        if name not in table:
            raise SystemExit(f"ms-swift: class {name} not found (a base outside the files read)")
        bases, fields = table[name]
        keys |= fields
        todo += [(where, b) for b in bases]
    return keys


def swift(root: Path, transformers_root: Path) -> None:
    package = root / "swift"
    ours = _dataclass_fields(sorted([*package.glob("arguments/**/*.py"), package / "trainers" / "arguments.py",
                                     package / "rlhf_trainers" / "args_mixin.py",
                                     package / "ray_utils" / "arguments.py"]))
    megatron = _dataclass_fields(sorted(package.glob("megatron/arguments/*.py"))) | ours
    theirs = _dataclass_fields([transformers_root / "transformers" / "training_args.py",
                                transformers_root / "transformers" / "training_args_seq2seq.py"])
    keys = _swift_keys(ours, theirs, SWIFT_ROOTS) | {"ENV"}
    rlhf_keys = _swift_keys(ours, theirs, SWIFT_RLHF_ROOTS) - keys
    megatron_keys = _swift_keys(megatron, theirs, SWIFT_MEGATRON_ROOTS) - keys - rlhf_keys
    version = re.search(r"__version__ = ['\"]([^'\"]+)", (package / "version.py").read_text())
    tf_version = re.search(r"__version__ = ['\"]([^'\"]+)", (transformers_root / "transformers" / "__init__.py")
                           .read_text())
    release = version.group(1) if version else "?"
    _write("swift", f"ms-swift {release}: the init fields of the dataclasses swift sft parses (swift/arguments/sft_args.py\n"
                    "SftArguments and its bases, RayArguments included) and transformers "
                    f"{tf_version.group(1) if tf_version else '?'}'s\nSeq2SeqTrainingArguments / TrainingArguments "
                    "(training_args*.py), plus ENV (swift/cli/main.py:53).\nWritten by scripts/config_sources.py.", keys)
    _write("swift_rlhf", f"ms-swift {release}: the keys only swift rlhf parses (swift/arguments/rlhf_args.py "
                         "RLHFArguments and its\nbases, swift/rlhf_trainers/args_mixin.py), less keys/swift.txt. "
                         "Written by scripts/config_sources.py.", rlhf_keys)
    _write("swift_megatron", f"ms-swift {release}: the keys only megatron sft and megatron rlhf parse (swift/megatron/"
                             "arguments/\nMegatronSftArguments, MegatronRLHFArguments and their bases), less "
                             "keys/swift.txt and keys/swift_rlhf.txt.\nWritten by scripts/config_sources.py.",
           megatron_keys)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--axolotl", type=Path)
    p.add_argument("--torchtune", type=Path)
    p.add_argument("--litgpt", type=Path)
    p.add_argument("--trl-python")
    p.add_argument("--mlx-lm", type=Path)
    p.add_argument("--llamafactory", type=Path)
    p.add_argument("--llamafactory-transformers", type=Path)
    p.add_argument("--swift", type=Path)
    p.add_argument("--swift-transformers", type=Path)
    args = p.parse_args()
    if args.axolotl:
        axolotl(args.axolotl)
    if args.torchtune:
        torchtune(args.torchtune)
    if args.litgpt:
        litgpt(args.litgpt)
    if args.trl_python:
        trl(args.trl_python)
    if args.mlx_lm:
        mlx_lm(args.mlx_lm)
    if args.llamafactory:
        if not args.llamafactory_transformers:
            p.error("--llamafactory needs --llamafactory-transformers (the unpacked transformers wheel)")
        llamafactory(args.llamafactory, args.llamafactory_transformers)
    if args.swift:
        if not args.swift_transformers:
            p.error("--swift needs --swift-transformers (the unpacked transformers wheel)")
        swift(args.swift, args.swift_transformers)


if __name__ == "__main__":
    main()
