"""A corpus of hand-made nasty training configs (for the importer, the CLI and the app's fuzz tests): malformed
YAML and JSON, object-building tags, binary junk, oversize, deep nesting, alias bombs, huge numbers, values of the
wrong type or out of range, other tools' files, and configs whose values carry HTML or Markdown to inject."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "configs"
INJECT = ("<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "**INJECTED**", "[click](javascript:alert(3))",
          "<b>bold</b>", "$\\LaTeX$", "`code`")
SCRIPT = INJECT[0]


def _nest(depth: int, flow: bool) -> str:
    return "a: " + "[" * depth + "]" * depth if flow else "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + \
        "  " * depth + "v: 1\n"


def nasty() -> list[tuple[str, bytes]]:
    """(name, bytes) pairs; every one must give a clear message or a partial import, never a traceback."""
    real = (DATA / "axolotl" / "llama-3" / "lora-1b.yml").read_text()
    cases: list[tuple[str, str | bytes]] = [
        ("empty", ""), ("spaces", "   \n\n  "), ("comment-only", "# nothing here\n"),
        ("list", "- base_model: x\n- adapter: lora\n"), ("scalar", "just a string"), ("number", "42"),
        ("null", "null"), ("yaml-unclosed", "base_model: x\nlora_target_modules: [q_proj, v_proj\n"),
        ("yaml-tab", "base_model: x\n\tadapter: lora\n"), ("yaml-bad-indent", "a:\n  b: 1\n c: 2\n"),
        ("yaml-dup", "micro_batch_size: 2\nmicro_batch_size: 3\nbase_model: x\nsequence_len: 1\n"),
        ("json-trailing", '{"model_name_or_path": "x", "use_peft": true,}'),
        ("json-nan", '{"model_name_or_path": "x", "per_device_train_batch_size": NaN}'),
        ("json-inf", '{"model_name_or_path": "x", "learning_rate": Infinity}'),
        ("json-deep", "{" + '"a":{' * 3000 + "}" * 3001),
        ("yaml-deep-flow", _nest(3000, True)), ("yaml-deep-block", _nest(60, False)),
        ("python-object", "!!python/object/apply:os.system ['echo pwned']\n"),
        ("python-object-key", "base_model: !!python/object/apply:os.system ['echo pwned']\n"),
        ("python-name", "base_model: !!python/name:os.system\n"),
        ("python-tuple", "base_model: !!python/tuple [1, 2]\n"),
        ("custom-tag", "base_model: !include other.yaml\n"),
        ("binary-tag", "base_model: !!binary aGVsbG8=\nmicro_batch_size: 2\nsequence_len: 64\n"),
        ("alias-bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                       "base_model: x\nmicro_batch_size: 1\n"),
        ("huge-int", "base_model: x\nmicro_batch_size: " + "9" * 5000 + "\nsequence_len: 10\n"),
        ("huge-float", "base_model: x\nsequence_len: 1.0e999\nmicro_batch_size: .inf\n"),
        ("negative", "base_model: x\nmicro_batch_size: -4\nsequence_len: -1\nlora_r: -8\nadapter: lora\n"),
        ("zero", "model_name_or_path: x\nper_device_train_batch_size: 0\nmax_length: 0\nnum_processes: 0\n"),
        ("wrong-types", "base_model: [1, 2]\nmicro_batch_size: two\nsequence_len: {a: 1}\nadapter: 3\n"
                        "gradient_checkpointing: sometimes\nbf16: maybe\nlora_target_modules: 5\n"),
        ("bool-as-int", "model_name_or_path: x\nper_device_train_batch_size: true\nuse_peft: 7\n"),
        ("long-key", "base_model: x\n" + "k" * 500 + ": 1\nsequence_len: 8\n"),
        ("many-keys", "base_model: x\nsequence_len: 8\n" + "".join(f"key_{i}: {i}\n" for i in range(25_000))),
        ("non-string-keys", "base_model: x\n1: one\n2.5: two\ntrue: three\nsequence_len: 8\n"),
        ("null-key", "base_model: x\n~: 1\nsequence_len: 8\n"),
        ("complex-key", "base_model: x\n? [a, b]\n: 1\nsequence_len: 8\n"),
        ("control-chars", "base_model: \"x\\u0007\\u001b[31m\"\nsequence_len: 8\n"),
        ("bidi", "base_model: \"x\u202eevil\"\nsequence_len: 8\n"),
        ("other-deepspeed", '{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 4}'),
        ("other-accelerate", "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"),
        ("other-hf-config", '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32}'),
        ("llamafactory-no-model", "stage: sft\nfinetuning_type: lora\ncutoff_len: 1024\n"),
        ("llamafactory-bad", "model_name_or_path: [1, 2]\nstage: grpo\nfinetuning_type: 7\ncutoff_len: -5\n"
                             "lora_rank: 0\nlora_target: [1, '']\nquantization_bit: 99\nquantization_method: evil\n"
                             "double_quantization: maybe\npure_bf16: sometimes\nbf16: 2\nflash_attn: fa9\n"
                             "disable_gradient_checkpointing: perhaps\nuse_unsloth_gc: 3\noptim: evil\n"
                             "deepspeed: 42\nper_device_train_batch_size: 0\nfreeze_vision_tower: no-thanks\n"),
        ("llamafactory-tower", "model_name_or_path: x/y\nstage: sft\nfreeze_vision_tower: false\n"
                               "freeze_multi_modal_projector: false\n"),
        ("llamafactory-deepspeed-missing", "model_name_or_path: x/y\nstage: sft\nfinetuning_type: full\n"
                                           "deepspeed: my/ds_custom.json\nbf16: true\n"),
        ("swift-no-model", "tuner_type: lora\ntarget_modules: all-linear\nmax_length: 1024\n"),
        ("swift-bad", "model: [1, 2]\ntuner_type: 7\nrlhf_type: evil\nlora_rank: 0\ntarget_modules: [1, '']\n"
                      "quant_method: evil\nquant_bits: 99\ntorch_dtype: float64\nbf16: maybe\nfp16: 2\n"
                      "gradient_checkpointing: perhaps\nuse_liger_kernel: 3\noptim: evil\ndeepspeed: 42\n"
                      "fsdp: '{bad json'\nper_device_train_batch_size: 0\ngradient_accumulation_steps: -1\n"
                      "max_length: x\nattn_impl: magic\nlora_dtype: int4\nfreeze_vit: no-thanks\n"
                      "ENV: [NPROC_PER_NODE, 8]\n"),
        ("swift-bad-env", "model: x/y\ntuner_type: full\nENV: {NPROC_PER_NODE: 0, NNODES: 99999, "
                          "CUDA_VISIBLE_DEVICES: [0, 1]}\ndeepspeed: '{\"zero_optimization\": '\n"),
        ("mlx-missing-scale", "model: x\nfine_tune_type: lora\nnum_layers: 16\nlora_parameters: {rank: 8}\n"),
        ("mlx-bad", "model: [1, 2]\nfine_tune_type: 7\nnum_layers: 1e9\nbatch_size: -3\nmax_seq_length: x\n"
                    "grad_checkpoint: maybe\ngrad_accumulation_steps: 0\noptimizer: {adam: 1}\n"
                    "optimizer_config: [1]\nlora_parameters: {rank: 0, scale: x, dropout: 2, keys: 5}\n"
                    "train: sometimes\n"),
        ("mlx-bad-blocks", "model: mlx-community/Qwen3-8B-4bit\nfine_tune_type: dora\nlora_parameters: [rank, 8]\n"
                           "optimizer: adafactor\noptimizer_config: {adafactor: [beta_1], adam: 3, lion: {}}\n"
                           "num_layers: -99999\n"),
        ("mlx-bad-keys", "model: x/y-9bit\nfine_tune_type: lora\nlora_parameters: {rank: 8, scale: 20.0, "
                         "dropout: 0.0, keys: [lm_head, '', model.layers.0.self_attn.q_proj, 3]}\n"),
        ("mlx-full-quantised", "model: mlx-community/Llama-3.2-1B-Instruct-4bit\nfine_tune_type: full\n"
                               "num_layers: 4\n"),
        ("mlx-old-keys", "model: mlx_model\nlora_layers: 4\nuse_dora: true\nadapter_file: a.npz\n"
                         "lora_parameters: {rank: 8, alpha: 16, scale: 10.0, dropout: 0.05}\n"),
        ("mlx-bad-marker", "# will-it-fit: stack=mlx trainer=grpo gpus=8 model=<script> dtype=fp64 q_mode=affine "
                           "q_bits=x q_group=-1\nmodel: ./mlx_model\nfine_tune_type: lora\n"),
        ("unknown-format", "foo: 1\nbar: 2\n"),
        ("ambiguous", "base_model: x\nmodel_name_or_path: y\n"),
        ("bad-deepspeed", "base_model: x\nsequence_len: 8\ndeepspeed: 42\n"),
        ("bad-deepspeed-stage", 'base_model: x\nsequence_len: 8\ndeepspeed: {"zero_optimization": {"stage": 9}}\n'),
        ("bad-marker", "# will-it-fit: stack=nope trainer=<script> gpus=-1 model=../../etc\nbase_model: x\n"
                       "sequence_len: 8\n"),
        ("marker-trainer-bad", "# will-it-fit: stack=axolotl trainer=grpo num_generations=1 prompt_len=0 "
                               "vllm_gpu_util=7\nbase_model: x\nsequence_len: 8\n"),
        ("torchtune-bad", "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n  lora_attn_modules: 5\n"
                          "  lora_rank: 1e9\nbatch_size: x\ndtype: fp64\noptimizer:\n  _component_: evil.Module\n"
                          "loss:\n  _component_: <script>\ntokenizer:\n  max_seq_len: -1\n"),
        ("litgpt-bad", "checkpoint_dir: ../../../etc/passwd\nprecision: 7\ndevices: auto\nlora_r: 0\n"
                       "train:\n  micro_batch_size: 0\n  global_batch_size: -1\n  max_seq_length: 1e12\n  bogus: 1\n"),
        ("trl-bad", "model_name_or_path: '<script>alert(1)</script>'\nuse_peft: true\nlora_target_modules: [1, 2]\n"
                    "accelerate_config: ../../x\nnum_processes: 100000\ndeepspeed: {}\noptim: evil\n"),
        ("real-truncated", real[: len(real) // 3]),
        ("real-with-junk", real + "\n\x07\x1b[0m: ]]]\n"),
        ("real-garbled", real.replace(":", " ", 5)),
        ("latin1", "base_model: caf\xe9\nsequence_len: 8\n".encode("latin-1")),
        ("binary-png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))),
        ("binary-utf16", "base_model: x\n".encode("utf-16")),
        ("oversize", "base_model: x\n" + "# padding\n" * 110_000),
        ("oversize-one-line", "base_model: " + "x" * 1_000_001),
    ]
    for i, text in enumerate(INJECT):  # values that carry markup, in each format
        cases += [
            (f"inject-axolotl-{i}", f"base_model: '{text}'\nadapter: lora\nlora_target_modules: ['{text}']\n"
                                    f"optimizer: '{text}'\nsequence_len: 128\n'{text}': 1\n"),
            (f"inject-trl-{i}", f'{{"model_name_or_path": "{text.replace(chr(92), "/")}", "optim": "x{i}", '
                                f'"{text.replace(chr(92), "/")}": 2, "per_device_train_batch_size": 1}}'),
            (f"inject-litgpt-{i}", f"checkpoint_dir: 'checkpoints/{text}'\nprecision: '{text}'\n"
                                   f"train:\n  micro_batch_size: 1\n  '{text}': 3\n"),
            (f"inject-llamafactory-{i}", f"model_name_or_path: '{text}'\nstage: '{text}'\nfinetuning_type: '{text}'\n"
                                         f"lora_target: '{text}'\nflash_attn: '{text}'\noptim: '{text}'\n"
                                         f"deepspeed: '{text}'\n'{text}': 1\ncutoff_len: 64\n"),
            (f"inject-swift-{i}", f"model: '{text}'\ntuner_type: '{text}'\ntarget_modules: ['{text}']\n"
                                  f"attn_impl: '{text}'\noptim: '{text}'\ndeepspeed: '{text}'\nrlhf_type: '{text}'\n"
                                  f"ENV: {{'{text}': '{text}'}}\n'{text}': 1\nmax_length: 64\n"),
            (f"inject-mlx-{i}", f"model: '{text}'\nfine_tune_type: '{text}'\noptimizer: '{text}'\n"
                                f"lora_parameters: {{rank: 8, scale: 20.0, dropout: 0.0, keys: ['{text}'], '{text}': 1}}"
                                f"\noptimizer_config: {{'{text}': {{}}}}\n'{text}': 2\n"),
        ]
    return [(name, data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data) for name, data in cases]
