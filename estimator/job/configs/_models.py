"""The model a config names, as a `ModelRef`: a preset (a preset id, a preset's own Hub repo, a torchtune builder of
the same architecture), a Hugging Face model id (read through estimator.models.hub; a same-architecture preset is
kept as the fallback when the Hub cannot be reached), a local path (its config.json is needed), or nothing. Also
fits LoRA target names written in Llama's names (torchtune's and LitGPT's switches) to a model's own modules."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...i18n import N_, Text
from ...models.hub import is_model_id, normalise_model_id, parse_model_id
from ...models.presets import list_presets, preset_ids
from ...models.spec import LM_HEAD
from ..setup import ALL_LINEAR

if TYPE_CHECKING:
    from ...models.spec import ModelSpec

PLACEHOLDER_IDS = frozenset({"your-org/your-model"})  # the exports' placeholder (report/snippets/common.py)

# torchtune 0.6.1 model builders (torchtune/models/*/_model_builders.py; lora_/qlora_ variants share the
# architecture) → the preset with the same config.json. Other builders (llama2, code_llama2, llama3 8B/70B,
# mistral_7b = Mistral-7B-v0.1, gemma_2b, gemma2_27b, qwen2, the 72B and 405B sizes…) have no preset.
TORCHTUNE_BUILDERS: dict[str, str] = {
    "llama3_1_8b": "llama-3.1-8b", "llama3_1_70b": "llama-3.1-70b", "llama3_3_70b": "llama-3.1-70b",
    "llama3_2_1b": "llama-3.2-1b", "llama3_2_3b": "llama-3.2-3b",
    "qwen2_5_0_5b": "qwen2.5-0.5b", "qwen2_5_1_5b_base": "qwen2.5-1.5b", "qwen2_5_1_5b_instruct": "qwen2.5-1.5b",
    "qwen2_5_3b": "qwen2.5-3b", "qwen2_5_7b_base": "qwen2.5-7b", "qwen2_5_7b_instruct": "qwen2.5-7b",
    "qwen2_5_14b_base": "qwen2.5-14b", "qwen2_5_14b_instruct": "qwen2.5-14b", "qwen2_5_32b_base": "qwen2.5-32b",
    "qwen2_5_32b_instruct": "qwen2.5-32b",
    "gemma_7b": "gemma-7b", "gemma2_2b": "gemma-2-2b", "gemma2_9b": "gemma-2-9b",
    "phi3_mini": "phi-3-mini", "phi4_14b": "phi-4",
}
# Name suffixes and prefixes of fine-tuned or renamed uploads of the same architecture (Meta-Llama-3.1-8B-Instruct
# is Llama-3.1-8B's config with another chat template): compared after lower-casing.
_VARIANT_SUFFIXES = ("-instruct", "-it", "-chat", "-hf", "-base", "-pt")
_VARIANT_PREFIXES = ("meta-",)


@dataclass(frozen=True)
class ModelRef:
    """The model a config names.

    kind: "preset" (a preset: no Hub read needed), "hub" (a Hugging Face id: read from the Hub; `preset`, if set,
    has the same architecture and stands in when the Hub cannot be reached), "local" (a path on the training
    machine: its config.json is needed) or "none"."""

    kind: str
    name: str  # as the config writes it
    preset: str | None = None

    @property
    def choice(self) -> str | None:
        """What the app's Model picker and the CLI's --model take: the preset id or the Hub id."""
        if self.kind == "preset":
            return self.preset
        if self.kind == "hub":
            return normalise_model_id(self.name)
        return None

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "name": self.name, "preset": self.preset}


def _norm(name: str) -> str:
    name = name.lower()
    for prefix in _VARIANT_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
    changed = True
    while changed:
        changed = False
        for suffix in _VARIANT_SUFFIXES:
            if name.endswith(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def _by_repo() -> tuple[dict[str, str], dict[str, str]]:
    exact = {p.hf_repo.lower(): p.id for p in list_presets() if p.hf_repo}
    variants: dict[str, str] = {}
    for p in list_presets():
        if p.hf_repo:
            variants.setdefault(_norm(p.hf_repo.split("/", 1)[1]), p.id)
    return exact, variants


def ref_from_name(name: object) -> ModelRef:
    """A model as a config names it: a preset id, a Hub id (a preset's own repo is that preset; a fine-tune or a
    mirror of a preset's architecture keeps the preset as its offline stand-in), a local path, or nothing."""
    if not isinstance(name, str) or not name.strip():
        return ModelRef("none", "")
    text = name.strip()
    if text in preset_ids():
        return ModelRef("preset", text, text)
    if text.lower() in PLACEHOLDER_IDS:
        return ModelRef("none", text)
    if is_model_id(text):
        repo, revision = parse_model_id(text)
        exact, variants = _by_repo()
        if revision is None and repo.lower() in exact:
            return ModelRef("preset", text, exact[repo.lower()])
        return ModelRef("hub", text, variants.get(_norm(repo.split("/", 1)[1])))
    return ModelRef("local", text)


def ref_from_torchtune(component: object) -> ModelRef:
    """A torchtune model builder ('torchtune.models.llama3_1.lora_llama3_1_8b') → its preset, if one has the
    same architecture; else "none" (the builder names no Hub model)."""
    if not isinstance(component, str) or not component.strip():
        return ModelRef("none", "")
    builder = component.strip().rsplit(".", 1)[-1]
    base = re.sub(r"^(q?lora)_", "", builder)
    preset = TORCHTUNE_BUILDERS.get(base)
    return ModelRef("preset", component.strip(), preset) if preset else ModelRef("none", component.strip())


def ref_from_litgpt(checkpoint_dir: object) -> ModelRef:
    """LitGPT's checkpoint_dir: `litgpt download ORG/NAME` writes checkpoints/ORG/NAME (litgpt/scripts/download.py),
    so checkpoints/ORG/NAME names that Hub model; any other path is local."""
    if not isinstance(checkpoint_dir, str) or not checkpoint_dir.strip():
        return ModelRef("none", "")
    text = checkpoint_dir.strip().rstrip("/")
    m = re.fullmatch(r"(?:\./)?checkpoints/([^/]+/[^/]+)", text)
    if m and is_model_id(m.group(1)):
        ref = ref_from_name(m.group(1))
        return ModelRef(ref.kind, text, ref.preset) if ref.kind == "preset" else ref
    return ModelRef("local", text)


# ---- LoRA targets in Llama's names → a model's own modules -----------------------------------------------------

_ROLE_OF = {"q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "o_proj": "attn_out",
            "gate_proj": "mlp_in", "up_proj": "mlp_in", "down_proj": "mlp_out"}


def fit_targets(spec: ModelSpec, targets: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """torchtune's and LitGPT's LoRA switches name Llama's modules (q_proj … down_proj). On a model whose modules
    are named otherwise (Phi-2's dense/fc1/fc2, Phi-3's fused qkv_proj and gate_up_proj), the names become that
    model's modules of the same role (what the tool's switch adapts there). Returns the targets and a note ('' when
    nothing changed)."""
    if targets == (ALL_LINEAR,):
        return targets, ""
    names = set(spec.linear_names()) | {LM_HEAD}
    if all(t in names for t in targets):
        return targets, ""
    out: list[str] = []
    for target in targets:
        if target in names:
            out.append(target)
            continue
        role = _ROLE_OF.get(target)
        same = [m.name for m in spec.by_role.get(role, ())] if role else []
        if not same:
            return targets, ""  # no module of that role: leave it to the estimate's own check to say so
        out += same
    fitted = tuple(dict.fromkeys(out))
    return fitted, Text(N_("LoRA targets {old} are {new} in {family}"), old=", ".join(targets),
                        new=", ".join(fitted), family=spec.family)
