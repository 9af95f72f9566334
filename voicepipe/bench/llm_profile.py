"""`voicepipe bench llm --profile`: where a fused pass's time goes.

The fused kernel (kernels/llama_step) keeps a per-member table of wall time by
phase while profiling is on (kernels/llama_step/profile.h): each matrix (q, k
and v are one fused matrix, gate and up another), the norms, the activation
quantisation, rotation, attention over the cache, silu, the LM head, and the
barriers' waits. This runs verifying passes of each row count at each thread
count, interleaved (a shared machine's load hits all alike), and reports each
phase's least time over the passes (per member: this filters out the time
slices other processes take on a shared machine) beside the fastest and the
median pass, with bytes read and the achieved GB/s per matrix and for attention; and
beside them the host's own memory read rate at each thread count (``read_gb_s``: the
kernel's team streaming 1 GiB, nothing else) and the time a pass's weight bytes take at
that rate (``floor_ms``): how far a pass is from what the memory gives (the matrices'
prefetching reads a little faster than the plain read: a pass may come in a few % under).
"""

from __future__ import annotations

import statistics

import torch

MATRICES = ("qkv", "o", "w13", "w2", "head")


def read_gb_s(
    threads: int, mib: int = 1024, passes: int = 7, buf: torch.Tensor | None = None
) -> float:
    """This host's memory read rate, GB/s: the fastest of ``passes`` reads of ``mib`` MiB
    (far past the caches) by ``threads`` members of the fused kernel's team. ``buf``: a
    uint8 buffer to read instead (a caller measuring again and again allocates it once)."""
    from voicepipe.nn import kernels

    mod = kernels.llama_step()
    if mod is None:
        raise ValueError("the read rate needs the fused kernel (kernels/llama_step)")
    if buf is None:
        buf = torch.ones(mib << 20, dtype=torch.uint8)  # (touched: every page is mapped)
    return buf.numel() / mod.read_seconds(buf, threads, passes) / 1e9


def pass_profile(m, ids: list[int], rows=(1, 8), threads=(1, 2), passes: int = 12) -> list[dict]:
    """One row per (threads, rows): each phase's least time over ``passes`` verifying
    passes (and the fastest and the median pass), with bytes read and GB/s.

    Passes run at the end of the prompt ``ids`` (the cache rolled back after each),
    with the head's argmax as the engine asks for it.
    """
    from voicepipe.nn.llm import llama

    if m.fused is None:
        raise ValueError("--profile needs the fused kernel (kernels/llama_step)")
    cache = m.new_cache(len(ids) + max(rows) + 1)
    llama.prefill(m, cache, ids)
    base = cache.length
    configs = [(th, t) for th in threads for t in rows]
    best: dict = {}
    walls: dict = {c: [] for c in configs}
    for i in range(passes + 1):  # pass 0 warms up
        for th, t in configs:
            arg = torch.empty(t, dtype=torch.long)
            m.fused.profile(True)
            llama.verify(m, cache, ids[-t:], best=arg, threads=th)
            tbl = m.fused.profile_table()
            cache.rollback(base)
            if i == 0:
                continue
            walls[(th, t)].append(tbl["wall_ms"])
            # Per member and phase, the least over passes: at a load above the core
            # count one time slice lost to another process (~4 ms) lands in some
            # phase of nearly every pass, so the fastest whole pass still carries one.
            prev = best.get((th, t))
            if prev is not None and len(prev["members"]) == len(tbl["members"]):
                for mp, mt in zip(prev["members"], tbl["members"], strict=True):
                    for k in mt:
                        mt[k] = min(mt[k], mp[k])
                tbl["wall_ms"] = min(tbl["wall_ms"], prev["wall_ms"])
            if prev is None or len(tbl["members"]) >= len(prev["members"]):
                best[(th, t)] = tbl
    m.fused.profile(False)
    rates = {th: read_gb_s(th) for th in threads}
    a = m.args
    out = []
    for th, t in configs:
        tbl = best[(th, t)]
        members = tbl["members"]
        kv_bytes = 2 * a.n_layer * a.n_kv_head * (base + t) * a.head_dim * 4
        phases = {}
        for name in members[0]:
            per = [round(mb[name], 3) for mb in members]
            ph: dict = {"ms": max(per)}
            if len(per) > 1:
                ph["members_ms"] = per
            nbytes = tbl["weight_bytes"].get(name, kv_bytes if name == "attention" else 0)
            if nbytes:
                ph["mb_read"] = round(nbytes / 1e6, 1)
                ph["gb_s"] = round(nbytes / (max(per) * 1e6), 1) if max(per) > 0 else None
            phases[name] = ph
        out.append(
            {
                "threads": th,
                "rows": t,
                "members": len(members),  # < threads when another caller held the team
                "context": base,
                "passes": passes,
                "wall_ms": round(tbl["wall_ms"], 2),
                # A pass with no phase disturbed: the sum of member 0's phase minima.
                "phases_min_sum_ms": round(sum(members[0].values()), 2),
                "wall_ms_median": round(statistics.median(walls[(th, t)]), 2),
                "read_gb_s": round(rates[th], 1),
                # The pass's weight bytes at that rate: the memory's share of a pass.
                "floor_ms": round(sum(tbl["weight_bytes"].values()) / (rates[th] * 1e6), 2),
                "phases": phases,
            }
        )
    return out


def markdown(rows: list[dict]) -> str:
    """The profile as the table docs/benchmarks/llm.md carries: ms (GB/s) per phase."""
    head = "| phase | " + " | ".join(f"{r['threads']} thr, {r['rows']} rows" for r in rows) + " |"
    lines = [head, "|---" * (len(rows) + 1) + "|"]
    for name in rows[0]["phases"]:
        cells = []
        for r in rows:
            ph = r["phases"][name]
            gb = f" ({ph['gb_s']} GB/s)" if ph.get("gb_s") else ""
            cells.append(f"{ph['ms']:.2f}{gb}")
        mb = rows[0]["phases"][name].get("mb_read")
        label = f"{name} ({mb} MB)" if mb else name
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        "| **sum of phase minima** | "
        + " | ".join(f"**{r['phases_min_sum_ms']:.2f}**" for r in rows)
        + " |"
    )
    lines.append("| pass (fastest) | " + " | ".join(f"{r['wall_ms']:.2f}" for r in rows) + " |")
    lines.append(
        "| pass (median) | " + " | ".join(f"{r['wall_ms_median']:.2f}" for r in rows) + " |"
    )
    lines.append(
        "| the weights at the host's read rate | "
        + " | ".join(f"{r['floor_ms']:.2f} ({r['read_gb_s']} GB/s)" for r in rows)
        + " |"
    )
    return "\n".join(lines)
