"""The host RAM a training setup needs beside the GPU: the processes themselves, what loading the model holds in CPU
RAM, and what the setup keeps there while it trains (offloaded optimizer state with ZeRO-Offload's master weights
and gradients, offloaded checkpoints, ZeRO-3's parameters, the pinned allocator's rounding). docs/formulas.md §10.

The host's peak is the larger of two moments that never overlap: loading the model (the load buffers are freed
before the first step) and the training steps. Every figure is for the whole machine: one process per GPU, all
`setup.gpus` processes on one host (a multi-node run divides the per-process terms by its nodes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..i18n import N_
from ..options.optimizers import OPTIMIZERS
from ..options.stacks import get_stack
from .precision import FP32, HALF, optimizer_state_bytes
from .result import DetailItem
from .result import detail as d

if TYPE_CHECKING:
    from ..job.setup import TrainingSetup
    from ..models.spec import ModelSpec
    from ..options.devices import Device

# Peak RSS of a process with python, torch 2.13 (CPU), transformers 5.24, peft 0.21 and trl 1.16 imported: 432 MiB
# measured by calibration/host_baseline.py (calibration/host_baseline.json, peak_rss_bytes.trl_stack).
HOST_IMPORT_BYTES = 452_788_224
# The same for an mlx-lm process: python with mlx 0.32.4 and mlx-lm 0.32.2's trainer imported (mlx.core, mlx.nn,
# mlx.optimizers, mlx_lm.lora, mlx_lm.tuner): 74.9 MiB measured by calibration/host_baseline.py (its mlx_stack row,
# mlx[cpu] on Linux). No torch and no CUDA runtime are loaded.
MLX_IMPORT_BYTES = 78_491_648
# The first CUDA call maps the CUDA libraries and the context's host side: +1,203.5 MiB of RSS measured on the
# first CUDA use in pytorch/pytorch#106511 (torch 2.1, 1,067.7 → 2,271.3 MiB).
CUDA_INIT_HOST_BYTES = round(1203.5 * 2**20)
CUDA_RUNTIME_KEY = "host.cuda_runtime"
HOST_KEYS = ("host.process_baseline", CUDA_RUNTIME_KEY, "host.model_load", "host.optimizer_offload",
             "host.master_weights", "host.offload_gradients", "host.offload_staging", "host.param_offload",
             "host.checkpoint_offload", "host.embedding_offload", "host.pinned_rounding", "host.paged_optimizer")
LOAD_KEYS = ("host.model_load",)  # the load's transient terms; every other term but the paging is the steps'


def pinned_size(nbytes: float) -> float:
    """What a pinned (page-locked) CPU allocation of `nbytes` really takes: torch's caching host allocator rounds
    every request up to the next power of two (torch 2.13 include/ATen/core/CachingHostAllocator.h:300-305,
    c10/core/AllocatorConfig.h:361: no threshold by default)."""
    if nbytes <= 0:
        return 0.0
    n = int(nbytes)
    return float(1 << (n - 1).bit_length()) if n > 1 else 1.0


@dataclass(frozen=True)
class HostRam:
    """CPU RAM on the host, in bytes, for the whole machine."""

    details: tuple[DetailItem, ...]  # every term (keys HOST_KEYS), the load's and the steps'
    processes: int  # training processes on the host (one per GPU)

    def _sum(self, keys: tuple[str, ...] | None = None, skip: tuple[str, ...] = ()) -> float:
        return float(sum(x.bytes for x in self.details
                         if (keys is None or x.key in keys) and x.key not in skip))

    @property
    def base_bytes(self) -> float:
        """The processes themselves (imports and the CUDA runtime's host side)."""
        return self._sum(("host.process_baseline", CUDA_RUNTIME_KEY))

    @property
    def load_bytes(self) -> float:
        """The host at the model load's peak: the processes and the load buffers."""
        return self.base_bytes + self._sum(LOAD_KEYS)

    @property
    def train_bytes(self) -> float:
        """The host during the training steps: the processes and everything the setup keeps in CPU RAM."""
        return self._sum(skip=LOAD_KEYS)

    @property
    def total_bytes(self) -> float:
        return max(self.load_bytes, self.train_bytes)

    @property
    def peak_phase(self) -> str:
        """'load' or 'train': which moment the host's peak is."""
        return "load" if self.load_bytes > self.train_bytes else "train"

    @property
    def offloaded_bytes(self) -> float:
        """What the setup keeps in CPU RAM while it trains, beside the processes themselves."""
        return self.train_bytes - self.base_bytes

    def without(self, *keys: str) -> HostRam:
        return HostRam(tuple(x for x in self.details if x.key not in keys), self.processes)

    def with_items(self, *items: DetailItem) -> HostRam:
        return HostRam(self.details + tuple(x for x in items if x.bytes > 0), self.processes)


def _load_item(spec: ModelSpec, setup: TrainingSetup, weights_bytes: float) -> DetailItem:
    """What loading the checkpoint holds in CPU RAM at its peak (Stack.host_load, options/stacks.py HOST_LOADS)."""
    n = setup.gpus
    how = get_stack(setup.stack).host_load if setup.stack else "cpu"
    largest = max(spec.largest_linear_params, spec.vocab_size * spec.hidden_size) * HALF
    if setup.method == "qlora" and how == "cpu":
        how = "direct"  # bitsandbytes places a 4-bit load on the GPU (transformers quantizer_bnb_4bit.py:94-97)
    if how == "cpu":
        # from_pretrained without a device_map materialises every weight on the CPU in its dtype, one copy per
        # process; under DeepSpeed ZeRO-3 only rank 0 reads the checkpoint (transformers 5.24
        # modeling_utils.py:4530-4533: map_location "cpu" on rank 0, "meta" elsewhere).
        copies = 1 if (setup.sharding == "zero3" and n > 1) else n
        return d("host.model_load", N_("Model load (whole model in CPU RAM, then moved)"), copies * weights_bytes,
                 f"{copies} × weights as loaded ({weights_bytes / 1e9:.2f} GB)")
    if how == "state_dict":
        # torchtune's checkpointer reads every tensor with safe_open(...).get_tensor into a CPU dict (bf16 checkpoint)
        ckpt = spec.params_total * HALF
        return d("host.model_load", N_("Model load (checkpoint read into a CPU state dict)"), n * ckpt,
                 f"{n} × 2 B × {spec.params_total:,} params")
    # direct: one tensor at a time leaves the memory-mapped file (its pages are the OS's file cache, reclaimable)
    return d("host.model_load", N_("Model load (one tensor at a time, memory-mapped)"), n * largest,
             "processes × largest tensor in 16-bit")


def _process_items(spec: ModelSpec, setup: TrainingSetup, weights_bytes: float) -> list[DetailItem]:
    """What every setup holds in CPU RAM: the training processes themselves, the CUDA runtime's host side and the
    model's load."""
    n = setup.gpus
    mlx = get_stack(setup.stack).framework == "mlx" if setup.stack else False
    imports = MLX_IMPORT_BYTES if mlx else HOST_IMPORT_BYTES  # an mlx-lm process imports no torch
    # the CUDA runtime's host side: PyTorch on a CUDA/ROCm device, MLX only on its CUDA backend (a unified-memory
    # device drops the term in host_verdict)
    cuda = CUDA_INIT_HOST_BYTES if (not mlx or setup.backend == "cuda") else 0
    return [
        d("host.process_baseline", N_("Training processes (Python and the training libraries)"),
          n * imports, f"{n} × {imports / 2**20:.0f} MiB (measured import peak)"),
        d(CUDA_RUNTIME_KEY, N_("CUDA runtime's host side (libraries, context)"), n * cuda,
          f"{n} × 1,203.5 MiB (first CUDA use)"),
        _load_item(spec, setup, weights_bytes),
    ]


def _zero_offload(setup: TrainingSetup, trainable: int, optimizer_cpu_bytes: float
                  ) -> tuple[list[DetailItem], float]:
    """ZeRO-Offload's CPU side (the optimizer state, fp32 master weights and gradients, the staging buffer) and the
    pinned rounding of each process's master partition."""
    n = setup.gpus
    # DeepSpeed ZeRO-Offload (0.18.2 runtime/zero/stage_1_and_2.py): the optimizer steps on fp32 master
    # partitions on the CPU (:437-462, always pinned at :445), their fp32 gradients on the CPU (:758-761, pinned
    # only with offload_optimizer.pin_memory, default false) and a 16-bit staging buffer (:446-455); the
    # optimizer state is fp32 like its parameters.
    option = OPTIMIZERS[setup.optimizer]
    state = (optimizer_state_bytes(setup.optimizer, FP32) * trainable if option.state_dtype != "factored"
             else optimizer_cpu_bytes)
    items = [
        d("host.optimizer_offload", N_("Optimizer state in CPU RAM (fp32, ZeRO-Offload)"), state,
          f"{option.states} fp32 states × {trainable:,} trainable params"),
        d("host.master_weights", N_("fp32 master weights in CPU RAM (ZeRO-Offload)"), FP32 * trainable,
          f"4 B × {trainable:,}"),
        d("host.offload_gradients", N_("fp32 gradients in CPU RAM (ZeRO-Offload)"), FP32 * trainable,
          f"4 B × {trainable:,}"),
        d("host.offload_staging", N_("16-bit staging buffer (ZeRO-Offload)"), HALF * trainable,
          f"2 B × {trainable:,}"),
    ]
    part = FP32 * trainable / max(n if setup.sharding != "none" else 1, 1)
    parts = n if setup.sharding != "none" else 1
    return items, parts * (pinned_size(part) - part)  # each process's master partition, pinned


def _checkpoint_offload(spec: ModelSpec, setup: TrainingSetup, checkpoint_cpu_bytes: float,
                        checkpoint_blocks: int | None, checkpoint_slots_bytes: float, pinned: bool = True
                        ) -> tuple[DetailItem, float]:
    """The checkpointed layer inputs in CPU RAM (all processes), and the pinned rounding of their blocks (none for
    pageable copies)."""
    n = setup.gpus
    # transformers activation_checkpointing_enable(offload=True) wraps the forward in
    # torch.autograd.graph.save_on_cpu(pin_memory=True) (modeling_utils.py:3166): every saved layer input is a
    # pinned CPU copy (torch/autograd/graph.py:405-413); Unsloth keeps one pinned buffer per layer.
    blocks = checkpoint_blocks or spec.num_layers
    layers = "L" if blocks == spec.num_layers else f"{blocks}"
    slots = f" + {checkpoint_slots_bytes / 2**20:.0f} MiB of initial slots" if checkpoint_slots_bytes else ""
    item = d("host.checkpoint_offload", N_("Checkpointed layer inputs in CPU RAM"),
             n * (checkpoint_cpu_bytes + checkpoint_slots_bytes),
             f"{n} × (T × {layers} × h{slots})" + (" (pinned)" if pinned else " (pageable)"))
    per_layer = checkpoint_cpu_bytes / max(blocks, 1)
    return item, (n * blocks * (pinned_size(per_layer) - per_layer) if pinned else 0.0)


def host_ram(spec: ModelSpec, setup: TrainingSetup, *, trainable: int, weights_bytes: float,
             optimizer_cpu_bytes: float, checkpoint_cpu_bytes: float, checkpoint_blocks: int | None = None,
             checkpoint_slots_bytes: float = 0.0, embedding_cpu_bytes: float = 0.0,
             checkpoint_pinned: bool = True) -> HostRam:
    """The host's terms for one estimate. `trainable`: trainable parameters; `weights_bytes`: every weight as
    loaded (unsharded); `optimizer_cpu_bytes`: the optimizer state the GPU side moved to CPU RAM (all processes);
    `checkpoint_cpu_bytes`: the checkpointed layer inputs kept in CPU RAM by one process, in `checkpoint_blocks`
    pinned blocks (default one per layer; pageable with checkpoint_pinned=False), plus `checkpoint_slots_bytes` of
    pinned slots made up front (Unsloth's 200 initial ones); `embedding_cpu_bytes`: an input embedding moved to CPU RAM (Unsloth's offload_embedding)."""
    n = setup.gpus
    items = _process_items(spec, setup, weights_bytes)
    rounding = 0.0
    if setup.offload_optimizer:
        offloaded, pinned = _zero_offload(setup, trainable, optimizer_cpu_bytes)
        items += offloaded
        rounding += pinned
    if setup.offload_params:
        # DeepSpeed ZeRO-3 offload_param: every parameter partition lives in CPU RAM (stage3.py:664-674), the whole
        # model across the processes
        items.append(d("host.param_offload", N_("Parameters in CPU RAM (ZeRO-3 parameter offload)"), weights_bytes,
                       "weights as loaded, partitioned over the processes"))
    if checkpoint_cpu_bytes:
        item, pinned = _checkpoint_offload(spec, setup, checkpoint_cpu_bytes, checkpoint_blocks,
                                           checkpoint_slots_bytes, checkpoint_pinned)
        items.append(item)
        rounding += pinned
    if embedding_cpu_bytes:
        items.append(d("host.embedding_offload", N_("Input embedding in CPU RAM (Unsloth's offload_embedding)"),
                       n * embedding_cpu_bytes, f"{n} × V × h × 2 B"))
    if rounding:
        items.append(d("host.pinned_rounding", N_("Pinned memory rounding (power of two per allocation)"), rounding,
                       "Σ (next power of two − size) over the pinned buffers"))
    return HostRam(tuple(x for x in items if x.bytes > 0), n)


def paged_spill(host: HostRam, setup: TrainingSetup, optimizer_bytes: float, gpu_total: float, usable: float
                ) -> HostRam:
    """A paged optimizer's state (bitsandbytes' paged AdamW) moves to CPU RAM page by page when the GPU runs out:
    up to the amount the GPU is short, at most the whole state (docs/formulas.md §10)."""
    if not OPTIMIZERS[setup.optimizer].paged or gpu_total <= usable or optimizer_bytes <= 0:
        return host
    spill = min(optimizer_bytes * setup.gpus, (gpu_total - usable) * setup.gpus)
    return host.with_items(d("host.paged_optimizer", N_("Paged optimizer state moved to CPU RAM under pressure"),
                             spill, "min(optimizer state, GPU shortfall)"))


@dataclass(frozen=True)
class HostVerdict:
    """Does the host's RAM hold what the setup needs there? On unified memory (one pool) the GPU side and the host
    side add up against the machine's usable memory."""

    needs_bytes: float  # the host's peak (unified: the GPU's peak plus the host's at the same moment)
    ram_bytes: float | None  # what the needs are compared with (None: no RAM given, no verdict)
    unified: bool
    host: HostRam

    @property
    def known(self) -> bool:
        return self.ram_bytes is not None

    @property
    def fits(self) -> bool:
        return self.ram_bytes is not None and self.needs_bytes <= self.ram_bytes

    @property
    def margin_bytes(self) -> float:
        return (self.ram_bytes or 0.0) - self.needs_bytes

    @property
    def headline(self) -> str:
        from ..i18n import _
        from ..units import fmt_gb

        if self.ram_bytes is None:
            return _("Host RAM needed: {needs}").format(needs=fmt_gb(self.needs_bytes))
        if self.unified:
            if self.fits:
                return _("GPU and host together fit: {needs} of {ram} usable").format(
                    needs=fmt_gb(self.needs_bytes), ram=fmt_gb(self.ram_bytes))
            return _("GPU and host together too big by {short}").format(short=fmt_gb(-self.margin_bytes))
        if self.fits:
            return _("Host RAM fits: {needs} of {ram}").format(needs=fmt_gb(self.needs_bytes), ram=fmt_gb(self.ram_bytes))
        return _("Host RAM too big by {short}").format(short=fmt_gb(-self.margin_bytes))


def host_verdict(host: HostRam, device: Device | None, ram_bytes: float | None, gpu_total: float = 0.0,
                 setup: TrainingSetup | None = None, optimizer_bytes: float = 0.0) -> HostVerdict:
    """The host's verdict. A discrete GPU: the host's peak against the machine's RAM (`ram_bytes`; None = not
    given). Unified memory: the device's RAM is the machine's RAM, so the GPU's peak and the host's training
    terms (the processes have no CUDA runtime there) add up against the device's usable memory; the load's peak is
    the other candidate."""
    if device is not None and setup is not None:
        host = paged_spill(host, setup, optimizer_bytes, gpu_total, device.usable_bytes)
    if device is not None and device.kind == "unified":
        host = host.without(CUDA_RUNTIME_KEY)
        needs = max(host.load_bytes, host.train_bytes - host._sum(("host.paged_optimizer",)) + gpu_total)
        return HostVerdict(needs, float(device.usable_bytes), True, host)
    return HostVerdict(host.total_bytes, ram_bytes, False, host)
