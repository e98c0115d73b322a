"""Why the CLI's output differs from the golden file, case by case: each differing case gets the list of the
intended changes it shows (or 'UNEXPLAINED: …'), and the categories are counted.

    .venv/bin/python -m tests.golden.classify            # counts per category; the unexplained cases in full
"""

from __future__ import annotations

import json
from collections import Counter

from tests.golden.generate import GOLDEN, cases, run

ADVICE_TEXT_START = "  what to change ("
NEW_TEXT_PREFIXES = ("  band: ", "  note: ")
HOST_TEXT_PREFIXES = ("  host RAM ", "    host.", "  host with ")  # report/text.py host_lines (issue 22)


def n_key(advice: dict, old_remedy: dict) -> str:
    return next(r["key"] for r in advice["remedies"] if (r["order"], r["title"]) == (old_remedy["order"],
                                                                                   old_remedy["title"]))


def _json_tags(old: dict, new: dict, argv: list[str]) -> list[str]:
    tags: list[str] = []
    old, new = json.loads(json.dumps(old)), json.loads(json.dumps(new))
    if "host" in new and "host" not in old:
        tags.append("JSON gained host (host RAM, issue 22)")
        del new["host"]
    if "offload_params" in new.get("setup", {}) and "offload_params" not in old.get("setup", {}):
        tags.append("JSON setup gained offload_params")
        del new["setup"]["offload_params"]
    if "device" in new and "band" in new["device"] and "band" not in old.get("device", {}):
        tags.append("JSON device gained band")
        del new["device"]["band"]
    if new.get("notes") != old.get("notes"):
        extra = [n for n in new.get("notes", []) if n not in old.get("notes", [])]
        if old.get("notes") == [n for n in new.get("notes", []) if n not in extra] and all(
                n.startswith("--") for n in extra):
            tags.append("JSON notes gained a flag note")
            new["notes"] = old.get("notes")
    if all("key" in d for d in new.get("details", [])) and not any("key" in d for d in old.get("details", [])):
        tags.append("JSON details gained key")
        new["details"] = [{k: v for k, v in d.items() if k != "key"} for d in new["details"]]
    if "--train-tower" in argv and "--image-tokens" not in argv and new.get("total_bytes") != old.get("total_bytes"):
        tags.append("tower trained without images priced as a real step (no tower gradients or state)")
        for k in ("components_bytes", "details", "device", "high_bytes", "low_bytes", "notes", "params_trainable",
                  "total_bytes"):
            new[k] = old.get(k)
    oa, na = old.pop("advice", None), new.pop("advice", None)
    if na is not None:
        if oa is None:
            tags.append("JSON gained advice (--rule seed)" if "--rule" in argv else "JSON gained advice")
        else:
            if "smallest_device" in na and "smallest_device" not in oa:
                tags.append("JSON advice gained smallest_device")
            if all("key" in r for r in na["remedies"]) and not any("key" in r for r in oa["remedies"]):
                tags.append("JSON remedies gained key")
            nr = [{k: v for k, v in r.items() if k != "key"} for r in na["remedies"]]
            orr = [{k: v for k, v in r.items() if k != "key"} for r in oa["remedies"]]
            if nr != orr:
                okeys = [(r["order"], r["title"]) for r in orr]
                nkeys = [(r["order"], r["title"]) for r in nr]
                if [k for k in nkeys if k not in okeys] and all(t.startswith("Shard") for _, t in nkeys if
                                                                (_, t) not in okeys):
                    tags.append("JSON remedies gained sharding (as the page)")
                if [k for k in okeys if k not in nkeys]:
                    tags.append("UNEXPLAINED: JSON remedies lost some")
                for o in orr:
                    n = next((r for r in nr if (r["order"], r["title"]) == (o["order"], o["title"])), None)
                    if n is None or n == o:
                        continue
                    if o["applicable"] and not n["applicable"] and o["saves_bytes"] == 0 and n["saves_bytes"] == 0:
                        tags.append(f"JSON remedy saving 0 → not applicable ({n_key(na, o)})")
                    elif (o["order"] == 2 and {k for k in o if o[k] != n[k]} == {"change"}
                          and o["change"] == "SFT needs a batch of at least 1" and n["change"] == "batch 1 → 1"):
                        tags.append("JSON SFT batch-1 remedy worded as the page ('batch 1 → 1')")
                    elif (o["applicable"] and not n["applicable"] and o["order"] == 2 and "--trainer" in argv
                          and argv[argv.index("--trainer") + 1] == "grpo"):
                        tags.append("JSON GRPO halved batch TRL refuses → not applicable")
                    elif {k for k in o if o[k] != n[k]} == {"saves_bytes"}:
                        tags.append("JSON remedy priced with the page's estimate (SFT)")
                    else:
                        tags.append(f"UNEXPLAINED: JSON remedy {o['order']} changed")
            for k in ("max_batch", "max_seq_len", "max_completion_len"):
                if oa.get(k) != na.get(k):
                    tags.append(f"JSON advice {k} changed (advise()'s limits)")
    if old != new:
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        tags.append(f"UNEXPLAINED: JSON keys {diff}")
    return tags


def _text_tags(old: str, new: str, argv: list[str]) -> list[str]:
    tags = []
    lines = new.splitlines()
    host_only = [line for line in lines if not (line.startswith(HOST_TEXT_PREFIXES) or " (one pool): " in line)]
    if host_only != lines and "\n".join(host_only) + ("\n" if host_only else "") == old:
        return ["text gained host RAM lines"]
    if ADVICE_TEXT_START in "\n".join(lines) or any(line.startswith(ADVICE_TEXT_START) for line in lines):
        i = next(i for i, line in enumerate(lines) if line.startswith(ADVICE_TEXT_START))
        tags.append("text gained advice (--rule seed)" if "--rule" in argv else "text gained advice")
        lines = lines[:i]
    if any(line.startswith("  band: ") for line in lines):
        tags.append("text gained band line")
    notes = [line for line in lines if line.startswith("  note: ")]
    if any(not n.startswith("  note: --") for n in notes):
        tags.append("text gained est.notes lines")
    if any(n.startswith("  note: --") for n in notes):
        tags.append("text gained a flag note")
    host = [line for line in lines if line.startswith(HOST_TEXT_PREFIXES) or " (one pool): " in line]
    if host:
        tags.append("text gained host RAM lines")
    kept = [line for line in lines if not line.startswith(NEW_TEXT_PREFIXES) and line not in host]
    if "\n".join(kept) + ("\n" if kept else "") != old:
        tags.append("UNEXPLAINED: text changed beyond band/notes/advice")
    return tags


def _without_allocator_conf(argv: list[str]) -> dict:
    """The CLI's output for argv with the Unsloth stack's PYTORCH_ALLOC_CONF emptied (PyTorch's default allocator
    and its 5 % slack): what the output was before the stack's allocator settings were priced."""
    from dataclasses import replace

    from estimator.memory import allocator, step, trainers
    from estimator.options import stacks

    def clear() -> None:
        allocator.stack_allocator.cache_clear()
        step.estimate.cache_clear()
        trainers.estimate_trainer.cache_clear()

    orig = stacks.STACKS["unsloth"]
    stacks.STACKS["unsloth"] = replace(orig, allocator_conf="")
    clear()
    try:
        return run(argv)
    finally:
        stacks.STACKS["unsloth"] = orig
        clear()


def classify(old: dict, new: dict) -> list[str]:
    argv = new["argv"]
    if old["rc"] == 99 and new["rc"] == 0:
        return [f"traceback → output ({old['err'].split(':')[0]})"]
    if old["rc"] != new["rc"]:
        what = new["err"].strip().removeprefix("estimator: error: ")[:48] if new["rc"] == 2 else "output"
        return [f"rc {old['rc']} → {new['rc']}: {what}"]
    if new["rc"] != 0:
        return [f"error message changed: {new['err'].strip()[:70]}"] if old["err"] != new["err"] else \
            ["UNEXPLAINED: same rc, other change"]
    if old["err"] != new["err"]:
        return ["UNEXPLAINED: stderr changed"]
    if "--stack" in argv and argv[argv.index("--stack") + 1] == "unsloth" and _without_allocator_conf(argv) == old:
        # issue 21, F: with Stack.allocator_conf emptied the output is the golden file's, byte for byte
        return ["unsloth stack: the allocator's expandable segments priced (docs/formulas.md §5.1), nothing else"]
    if "--stack" in argv and argv[argv.index("--stack") + 1] == "unsloth":  # issue 21: the stack re-read
        if "Unsloth's attention is counted" in new["out"]:
            return ["unsloth stack: Unsloth's own model (FastLlamaModel), adamw_8bit, notes, host RAM terms"]
        return ["unsloth stack: FastModel (transformers' modules) with adamw_8bit and a note"]
    if "--json" in argv:
        try:
            return _json_tags(json.loads(old["out"]), json.loads(new["out"]), argv)
        except json.JSONDecodeError:
            return ["UNEXPLAINED: not JSON"]
    return _text_tags(old["out"], new["out"], argv)


def main() -> int:
    old = {json.dumps(r["argv"]): r for r in map(json.loads, GOLDEN.read_text().splitlines())}
    counts: Counter[str] = Counter()
    combos: Counter[str] = Counter()
    unexplained = []
    n_diff = 0
    all_cases = cases()
    for argv in all_cases:
        new = run(argv)
        before = old[json.dumps(argv)]
        if before == new:
            continue
        n_diff += 1
        tags = list(dict.fromkeys(classify(before, new)))
        counts.update(tags)
        combos[" + ".join(tags)] += 1
        if not tags or any(t.startswith("UNEXPLAINED") for t in tags):
            unexplained.append((argv, tags))
    print(f"{len(all_cases)} cases, {n_diff} differ")
    print("\nper category (a case can be in several):")
    for tag, n in counts.most_common():
        print(f"  {n:4d}  {tag}")
    print("\nper combination:")
    for tag, n in combos.most_common():
        print(f"  {n:4d}  {tag}")
    for argv, tags in unexplained:
        print("UNEXPLAINED:", " ".join(argv), tags)
    return 1 if unexplained else 0


if __name__ == "__main__":
    raise SystemExit(main())
