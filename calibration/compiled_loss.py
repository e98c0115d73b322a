"""What torchtune's compiled cross-entropy keeps for backward (developer tool; needs torch, e.g. .venv-cal).

torchtune 0.6.1 ``compile=True`` compiles ``CEWithChunkedOutputLoss.compute_cross_entropy`` (or the whole
``nn.CrossEntropyLoss``) with inductor (``torchtune/training/_compile.py`` ``compile_loss``). Inductor partitions the
joint graph with ``min_cut_rematerialization_partition`` after its own decompositions; the forward graph's extra
outputs are exactly the tensors saved for backward. This script compiles the same function with those two pieces
(and eager kernels, so no C++ compiler is needed) and prints the saved tensors' shapes and dtypes, which the
estimator's compiled torchtune losses count (estimator/memory/hf/activations/ loss_memory, docs/formulas.md §4.1).

    .venv-cal/bin/python -m calibration.compiled_loss
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from functorch.compile import make_boxed_func
from torch._functorch.aot_autograd import aot_module_simplified
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._inductor.decomposition import select_decomp_table


def saved_for_backward(fn, *inputs: torch.Tensor) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Shapes and dtypes of the forward graph's outputs (the loss first, then what backward keeps)."""
    seen: list[tuple[tuple[int, ...], torch.dtype]] = []

    def fw(gm, _inputs):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        seen.extend((tuple(a.meta["val"].shape), a.meta["val"].dtype) for a in out.args[0])
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=fw, bw_compiler=lambda g, _i: make_boxed_func(g.forward),
                                     partition_fn=min_cut_rematerialization_partition,
                                     decompositions=select_decomp_table())

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(*inputs).backward()
    return seen


def chunk_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """CEWithChunkedOutputLoss.compute_cross_entropy (torchtune 0.6.1)."""
    return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")


def main() -> None:
    n, vocab = 1024, 32000
    labels = torch.randint(0, vocab, (n,))
    bf16 = torch.randn(n, vocab, dtype=torch.bfloat16, requires_grad=True)
    print("chunked (bf16 logits chunk in):", saved_for_backward(chunk_ce, bf16, labels))
    fp32 = torch.randn(n, vocab, dtype=torch.float32, requires_grad=True)
    full = torch.nn.CrossEntropyLoss()
    print("nn.CrossEntropyLoss (the model's fp32 logits in):", saved_for_backward(full, fp32, labels))


if __name__ == "__main__":
    main()
