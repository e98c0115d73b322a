"""Optimizers: their state per parameter, state dtypes, step temporaries and the classes that implement them."""

from __future__ import annotations

from dataclasses import dataclass

from ..i18n import N_


@dataclass(frozen=True)
class OptimizerOption:
    """An optimizer as the estimate counts it and as the frameworks name it."""

    id: str
    label: str
    hf_optim: str  # transformers TrainingArguments.optim (OptimizerNames)
    states: int  # state tensors per trainable parameter (exp_avg, exp_avg_sq, momentum…)
    state_dtype: str  # "param" (same dtype as the parameter), "fp32", "8bit" (bnb blockwise) or "factored"
    step_temporaries: bool  # does the step allocate a parameter-sized buffer (torch's foreach path)?
    summary: str
    source: str
    # The option as a torch / bitsandbytes class, for the stacks that build the optimizer themselves (torchtune
    # configs, LitGPT's --optimizer, a plain loop): class path and the keyword arguments the option needs.
    torch_class: str = ""
    torch_kwargs: tuple[tuple[str, object], ...] = ()
    # Is the state in bitsandbytes' paged (unified) memory, which it can page to CPU RAM under pressure?
    # (bitsandbytes optim/optimizer.py: is_paged=True allocates the state with get_paged)
    paged: bool = False
    # The name mlx-lm's --optimizer gives this option ("" when mlx-lm does not offer it; mlx_lm/lora.py:49-56 choices
    # adam, adamw, muon, sgd, adafactor), and whether only mlx-lm offers it (refused on the PyTorch stacks).
    mlx_name: str = ""
    mlx_only: bool = False

    @property
    def torch_init_kwargs(self) -> dict[str, object]:
        return dict(self.torch_kwargs)


# bitsandbytes 8-bit blockwise optimizer state, bytes per element per state: one uint8 + one fp32 absmax per
# 256 elements (bitsandbytes optim/optimizer.py, blocksize 256; Dettmers et al. 2110.02861).
BNB_8BIT_BLOCKSIZE = 256
BNB_8BIT_STATE_BYTES = 1 + 4 / BNB_8BIT_BLOCKSIZE

SGD_MOMENTUM = 0.9  # the estimate counts one momentum buffer; transformers' optim="sgd" has momentum 0 otherwise


OPTIMIZERS: dict[str, OptimizerOption] = {o.id: o for o in (
    OptimizerOption("adamw", N_("AdamW (fused)"), "adamw_torch_fused", 2, "param", False,
                    N_("Two states (exp_avg, exp_avg_sq) in the parameter's dtype; the fused kernel updates in place."),
                    "torch/optim/adamw.py (fused=True); transformers 5.24 training_args.py default_optim "
                    "'adamw_torch_fused' with torch ≥ 2.8",
                    torch_class="torch.optim.AdamW", torch_kwargs=(("fused", True),), mlx_name="adamw"),
    OptimizerOption("adamw_foreach", N_("AdamW (torch default, foreach)"), "adamw_torch", 2, "param", True,
                    N_("Two states like fused AdamW, plus one parameter-sized temporary per step (foreach path)."),
                    "torch/optim/adamw.py: foreach is the CUDA default when fused is not requested; "
                    "torch/optim/optimizer.py _foreach_doc",
                    torch_class="torch.optim.AdamW", torch_kwargs=(("foreach", True),)),
    OptimizerOption("adamw_8bit", N_("8-bit AdamW (bitsandbytes)"), "adamw_bnb_8bit", 2, "8bit", False,
                    N_("Two uint8 blockwise states + one fp32 absmax per 256 elements."),
                    "bitsandbytes optim/optimizer.py (blocksize 256); Dettmers et al. 2110.02861",
                    torch_class="bitsandbytes.optim.AdamW8bit"),
    OptimizerOption("paged_adamw", N_("Paged AdamW 32-bit"), "paged_adamw_32bit", 2, "fp32", False,
                    N_("Two fp32 states in paged (unified) memory; counted on the GPU."),
                    "bitsandbytes optim/adamw.py PagedAdamW32bit",
                    torch_class="bitsandbytes.optim.PagedAdamW32bit", paged=True),
    OptimizerOption("paged_adamw_8bit", N_("Paged AdamW 8-bit"), "paged_adamw_8bit", 2, "8bit", False,
                    N_("Two 8-bit blockwise states in paged memory; counted on the GPU."),
                    "bitsandbytes optim/adamw.py PagedAdamW8bit",
                    torch_class="bitsandbytes.optim.PagedAdamW8bit", paged=True),
    OptimizerOption("sgd", N_("SGD with momentum"), "sgd", 1, "param", False,
                    N_("One momentum buffer in the parameter's dtype."),
                    "torch/optim/sgd.py (momentum_buffer)",
                    torch_class="torch.optim.SGD", torch_kwargs=(("momentum", SGD_MOMENTUM),), mlx_name="sgd"),
    OptimizerOption("adafactor", N_("Adafactor"), "adafactor", 1, "factored", False,
                    N_("fp32 row and column factors per matrix; a full fp32 second moment for 1-D tensors."),
                    "transformers optimization.py Adafactor (beta1=None)",
                    torch_class="transformers.optimization.Adafactor",
                    torch_kwargs=(("scale_parameter", False), ("relative_step", False), ("warmup_init", False)),
                    mlx_name="adafactor"),
    OptimizerOption("lion", N_("Lion"), "lion_32bit", 1, "fp32", False,
                    N_("One fp32 exp_avg (bitsandbytes lion_32bit)."),
                    "bitsandbytes optim/lion.py Lion32bit",
                    torch_class="bitsandbytes.optim.Lion32bit"),
    # mlx-lm's own optimizers (mlx/optimizers/optimizers.py, mlx 0.32.4): every state is zeros_like(parameter), so
    # it has the parameter's dtype (fp32 for LoRA adapters).
    OptimizerOption("adam", N_("Adam (MLX)"), "", 2, "param", False,
                    N_("mlx-lm's default: two states (m, v) in the parameter's dtype, no bias correction."),
                    "mlx/optimizers/optimizers.py:475-550 Adam (init_single :521-524: m, v = zeros_like); mlx_lm/lora.py"
                    ":49-56 (--optimizer default adam)", mlx_name="adam", mlx_only=True),
    OptimizerOption("muon", N_("Muon (MLX)"), "", 1, "param", False,
                    N_("One momentum buffer in the parameter's dtype (Newton-Schulz orthogonalised updates)."),
                    "mlx/optimizers/optimizers.py:868- Muon (init_single :909-911: v = zeros_like)", mlx_name="muon",
                    mlx_only=True),
)}
OPTIMIZER_IDS: tuple[str, ...] = tuple(OPTIMIZERS)
OPTIMIZER_LABELS = {k: o.label for k, o in OPTIMIZERS.items()}
