"""The seed page's rule of thumb, exactly as the product page states it (quoted in the README's opening), so the app can show it next to
the detailed estimate and say how far apart they are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import N_, Text
from ..job.setup import TrainingSetup
from ..units import GB
from .adapters import lora_params
from .assemble import assemble
from .overhead import RuntimeContext
from .parts import StepParts
from .result import COMPONENT_KEYS, Estimate, Phase, detail
from .runtimes import runtime_for

if TYPE_CHECKING:
    from ..models.spec import ModelSpec


LORA_GB_PER_B = 2.0  # frozen 16-bit base: 2 bytes per weight = 2 GB per billion (seed)
LORA_MARGIN_GB = 3.0  # "~3 GB": adapter, its optimizer state, activations at moderate lengths, framework
FULL_GB_PER_B = 12.0  # 2 (bf16 weight) + 2 (bf16 grad) + 4 + 4 (Adam moments in fp32) bytes per weight
FULL_MASTER_GB_PER_B = 16.0  # + 4 bytes for a 32-bit master copy (classic mixed precision)
FULL_MARGIN_GB = 4.0  # "~4 GB"
# QLoRA: "about a third of LoRA", plus the fixed working margin that 4-bit storage does not shrink.
# Reproduces the seed's examples: 8B ≈ 9 GB (vs 19 with LoRA), 27–32B ≈ 22–26 GB.
QLORA_FRACTION = 1 / 3
QLORA_MARGIN_GB = 3.0
FOUR_BIT_GB_PER_B = 0.5  # "a 4-bit base takes about a quarter of a 16-bit one": 0.5 bytes per weight


RULE_SENTENCE = N_("LoRA ≈ {lora_per_b} GB per billion parameters + {lora_margin} GB, full fine-tuning ≈ "
                   "{full_per_b} GB per billion + {full_margin} GB ({master_per_b} GB per billion with precision "
                   "'mixed', the fp32 master copy), QLoRA ≈ a third of LoRA + {qlora_margin} GB, never above LoRA")


def rule_sentence() -> Text:
    """The rule of thumb in words, from the constants rule_gb uses: the one sentence every page shows (the
    sidebar toggle's help, compare, size table, how it works); translated where shown by _()."""
    def gb(value: float) -> tuple[float, int]:
        return (value, 0 if float(value).is_integer() else 1)
    return Text(RULE_SENTENCE, lora_per_b=gb(LORA_GB_PER_B), lora_margin=gb(LORA_MARGIN_GB),
                full_per_b=gb(FULL_GB_PER_B), full_margin=gb(FULL_MARGIN_GB), master_per_b=gb(FULL_MASTER_GB_PER_B),
                qlora_margin=gb(QLORA_MARGIN_GB))


def rule_gb(size_b: float, method: str, master_copy: bool = False) -> float:
    """The rule of thumb in GB (decimal) for a model of size_b billion parameters: the one rule every page
    uses (calculator, compare, what fits, size table, advice)."""
    lora = LORA_GB_PER_B * size_b + LORA_MARGIN_GB
    if method == "lora":
        return lora
    if method == "qlora":
        # Never above LoRA: the 4-bit base is smaller and the working margin the same (below 0.75B the
        # "third + 3 GB" form would exceed LoRA's own number).
        return min(lora, lora * QLORA_FRACTION + QLORA_MARGIN_GB)
    if method == "full":
        per_b = FULL_MASTER_GB_PER_B if master_copy else FULL_GB_PER_B
        return per_b * size_b + FULL_MARGIN_GB
    raise ValueError(f"method must be full, lora or qlora; got {method!r}")


def rule_components_gb(size_b: float, method: str, master_copy: bool = False) -> dict[str, float]:
    """The rule split into the app's components (GB): per-weight bytes as the page lists them, and the
    fixed margin as overhead (it covers activations at moderate lengths, adapter and framework)."""
    total = rule_gb(size_b, method, master_copy)
    comps = dict.fromkeys(COMPONENT_KEYS, 0.0)
    if method == "full":
        comps["weights"] = 2.0 * size_b  # 16-bit weight
        comps["gradients"] = 2.0 * size_b  # 16-bit gradient
        comps["optimizer"] = (12.0 if master_copy else 8.0) * size_b  # two fp32 moments (+ fp32 master copy)
    elif method == "lora":
        comps["weights"] = LORA_GB_PER_B * size_b  # frozen 16-bit base
    else:
        comps["weights"] = FOUR_BIT_GB_PER_B * size_b  # frozen 4-bit base
    comps["overhead"] = total - sum(comps.values())
    return comps


def seed_figure_gb(spec: ModelSpec, method: str, lora_rank: int = 16) -> dict[str, float]:
    """The seed's 7B figure: GPU memory before activations (GB), by segment: full FT with Adam + fp32 copy
    is 16 B/weight; LoRA/QLoRA hold the frozen base plus the adapter's weights, grads and Adam + fp32 copy
    (2 + 2 + 12 = 16 B per adapter weight; ≈ 40 M adapter weights for 7B)."""
    size = spec.params_total
    if method == "full":
        return {"frozen weights": 0.0, "trainable weights": 2 * size / GB, "gradients": 2 * size / GB,
                "optimizer state": 12 * size / GB}
    adapter = lora_params(spec, TrainingSetup(method="lora", lora_rank=lora_rank))
    base = (2.0 if method == "lora" else FOUR_BIT_GB_PER_B) * size / GB
    return {"frozen weights": base, "trainable weights": 2 * adapter / GB, "gradients": 2 * adapter / GB,
            "optimizer state": 12 * adapter / GB}


def seed_estimate(spec: ModelSpec, setup: TrainingSetup) -> Estimate:
    """An Estimate in the seed's rule-of-thumb mode. `precision='mixed'` selects the master-copy variant.
    The rule ignores batch, length, optimizer and sharding, as the page does. Assembled like every estimate
    (memory/assemble.py): one phase holding the rule's per-weight bytes, its fixed margin as the runtime's context,
    no allocator and no error band, and no phases shown (the rule has none)."""
    size_b = spec.params_total / 1e9
    master = setup.precision == "mixed"
    comps_gb = rule_components_gb(size_b, setup.method, master)
    comps = {k: v * GB for k, v in comps_gb.items()}
    # the adapters as the stack's runtime builds them (LitGPT's fused QKV switches make other counts)
    trainable = spec.params_total if setup.method == "full" else runtime_for(setup).lora_params(spec, setup)
    labels = {"weights": N_("16-bit weights") if setup.method != "qlora" else N_("4-bit base"),
              "gradients": N_("16-bit gradients"),
              "optimizer": N_("Adam moments (fp32) + master copy") if master else N_("Adam moments (fp32)")}
    details = tuple(detail(f"{k}.rule", labels.get(k, k), v, "rule of thumb") for k, v in comps.items()
                    if v > 0 and k != "overhead")
    peak_phase = N_("rule of thumb (no phases)")  # N_: translated where shown
    rule = Phase("rule", peak_phase, comps["weights"], comps["gradients"], comps["optimizer"], comps["activations"],
                 details)
    margin = comps["overhead"]
    return assemble(StepParts(
        model=spec, setup=setup, phases=(rule,), context=RuntimeContext(margin, margin, margin, 0, "rule of thumb"),
        allocator=None, error=(0.0, 0.0), params_total=spec.params_total, params_trainable=trainable, mode="seed",
        notes=(N_("Rule of thumb: ignores batch size, max length, optimizer and architecture."),),
        context_key="overhead.rule",
        context_label=N_("Fixed margin (activations at moderate length, adapter, framework)"),
        report_phases=False))
