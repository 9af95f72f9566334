"""`voicepipe train draft-data`: the target's own greedy replies, generated as a server serves.

The draft for the default LLM learns the replies the target really gives. One reply at
a time, the 1.5B decodes 7-34 tokens/s here; its batched decode pass (``nn.llm.batched``)
yields 5-6× that at 8 rows, because the pass reads the weights once for every row. So
this generator keeps ``--rows`` sessions in flight and runs all of them in one pass of
the fused int4 kernel per token; a row whose reply ends is refilled with the next prompt
in the very next pass (its prompt rows join the others' decode rows). Each row's logits
are bit-identical to its own pass alone (``score_batch``), so the replies are what the
one-at-a-time engine says (``--check`` compares them on the real model).

Prompts are rendered as a served session's first turn renders them (``LlmStage``: the
serving system prompt, and the tools block where the template shows tools), and every
row copies the system prompt's keys and values from the prefix cache.

The shard (``draft_shard``) holds token ids only, small enough to commit; ``--features``
recomputes the target's features along it as ``train draft --stage fit`` reads them
(``draft_features``), and ``--with-features`` keeps the ones the generating passes
compute anyway (each row a FeatureTarget), part by part beside the shard's. A killed job
resumes where it stopped: prompts whose id is in the shard are skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicepipe.training import draft_features
from voicepipe.training import draft_shard as shard


@dataclass
class _Row:
    job: shard.Reply
    target: Any  # ModelTarget
    slot: int
    reply: list[int] = field(default_factory=list)


def served_prompts(cfg: Any, engine: Any) -> tuple[list[int], Callable[[str], list[int]]]:
    """(the prefix every served first turn starts with, question -> the served prompt's
    ids): rendered by the LLM stage itself, so the data sees what a session sends."""
    from voicepipe.stages.llm.engine import system_prefix
    from voicepipe.stages.llm.local import LocalEngine
    from voicepipe.stages.llm.stage import LlmStage

    st = LlmStage(cfg, engine)  # an engine given: tools and system prompt set up now
    conv, backend = st.conversation, st.backend
    assert isinstance(backend, LocalEngine)  # an engine was given: the local backend
    prefix = system_prefix(engine.tokenizer, conv.system_text(), conv.specs)

    def render(question: str) -> list[int]:
        ids = backend.prompt(question)  # exactly the stage's rendering
        if ids[: len(prefix)] != prefix:
            raise ValueError(f"prompt for {question!r} does not start with the system prefix")
        return ids

    return prefix, render


Record = Callable[[shard.Reply, Any], None]


def _row_targets(engine: Any, rows: int, features: bool) -> list[Any]:
    """A session's target per row; with ``features``, FeatureTargets over the same model,
    prefix store and thread settings as the engine's: the pass writes each fed position's
    feature too."""
    if not features:
        return [engine.fork().target for _ in range(rows)]
    from voicepipe.nn.llm.draft_spec import FeatureTarget

    base = engine.target
    out = []
    for _ in range(rows):
        ft = FeatureTarget(engine.model, base.max_len)
        ft.prefixes, ft.prefill_threads, ft.decode_threads = (
            base.prefixes, base.prefill_threads, base.decode_threads,
        )  # fmt: skip
        out.append(ft)
    return out


def batched_replies(
    engine: Any,
    jobs: Iterable[shard.Reply],
    rows: int,
    max_new: int,
    stop: set[int],
    record: Record | None = None,
) -> Iterator[shard.Reply]:
    """Greedy replies to ``jobs`` (``prompt``: the whole prompt's ids), ``rows`` at a
    time in one model pass per token, a finished row refilled at once. Yields each job
    with ``reply`` and ``ended`` set, in the order they finish.

    ``record``: called with each finished reply and its row's features (position i's
    feature at row i, prompt and reply, as the passes computed them) before it is
    yielded: the draft's training input at no extra pass (``--with-features``)."""
    import numpy as np

    from voicepipe.nn.llm.batched import Pass, score_batch
    from voicepipe.speculative.rules import Greedy
    from voicepipe.speculative.types import Scores

    if rows < 1:
        raise ValueError("rows must be at least 1")
    rule, rng = Greedy(), np.random.default_rng(0)  # (greedy draws nothing)
    todo = iter(jobs)
    targets = _row_targets(engine, rows, record is not None)
    live: list[_Row | None] = [None] * rows
    exhausted = False
    while True:
        passes: list[Pass] = []
        owners: list[_Row] = []
        for i in range(rows):
            row = live[i]
            if row is None and not exhausted:
                job = next(todo, None)
                if job is None:
                    exhausted = True
                else:
                    if len(job.prompt) + max_new > targets[i].max_len:
                        raise ValueError(f"prompt {job.pid} is too long for the KV cache")
                    row = live[i] = _Row(job, targets[i], i)
                    passes.append(Pass.prefill(row.target, job.prompt))
                    owners.append(row)
                    continue
            if row is not None:
                passes.append(Pass(row.target, [row.reply[-1]]))
                owners.append(row)
        if not passes:
            return
        for row, sc in zip(owners, score_batch(engine.model, passes), strict=True):
            last = Scores(sc.logits[-1:], None if sc.best is None else sc.best[-1:])
            tok = rule.verify([], None, last, rng).next_token
            row.reply.append(tok)
            if tok in stop or len(row.reply) >= max_new:
                live[row.slot] = None
                done = row.job.done(row.reply, tok in stop)
                if record is not None:
                    record(done, row.target.feats)
                yield done


def single_replies(
    engine: Any, jobs: Iterable[shard.Reply], max_new: int, stop: set[int]
) -> Iterator[shard.Reply]:
    """The same replies one at a time, by the serving engine's own plain greedy decoder."""
    dec = engine.fork().decoder()
    for job in jobs:
        out: list[int] = []
        for toks in dec.generate(job.prompt, max_new, stop):
            out += toks
        yield job.done(out, bool(out) and out[-1] in stop)


def serving_engine(cfg: Any, model: str, max_len: int) -> Any:
    """The target as the server loads it (config [llm] weights and threads), no drafter,
    with a prefix cache."""
    from voicepipe.nn.llm.engine import load_engine

    c = cfg.llm
    return load_engine(
        model, c.weights, "none", max_len=max_len, prefix_cache=True,
        prefill_threads=c.prefill_threads, decode_threads=c.decode_threads,
    )  # fmt: skip


def _jobs(questions: list[str], render: Callable[[str], list[int]]) -> list[shard.Reply]:
    return [shard.Reply.ask(q, render(q)) for q in questions]


class _Progress:
    """One line per flush: replies done (of the set), tokens/s, replies/h and ETA."""

    def __init__(self, done: int, total: int) -> None:
        self.t0 = time.perf_counter()
        self.start, self.done, self.total, self.tokens = done, done, total, 0

    def add(self, r: shard.Reply) -> None:
        self.done += 1
        self.tokens += len(r.reply)

    def line(self) -> str:
        dt = max(time.perf_counter() - self.t0, 1e-9)
        new = self.done - self.start
        rate = new / dt
        eta = (self.total - self.done) / rate / 3600 if rate else float("inf")
        return (
            f"replies {self.done}/{self.total} (+{new} this run) | {self.tokens / dt:.1f} tok/s | "
            f"{rate * 3600:.0f} replies/h | ETA {eta:.1f} h"
        )


def run(args: argparse.Namespace) -> int:
    from voicepipe.training.draft_data_prompts import data_prompts, file_prompts

    cfg = args.config
    model = args.model or cfg.llm.model
    out = Path(args.out) if args.out else shard.default_dir(model)
    if args.features:  # the trainer's input from the shard: no generation
        n = draft_features.export(
            out, Path(args.features), args.max_len, args.prompt_ctx, args.threads
        )
        print(f"{n} gen files written to {args.features}", flush=True)
        return 0
    eng = serving_engine(cfg, model, args.max_len)
    prefix, render = served_prompts(cfg, eng)
    eng.share_prefix(prefix)  # computed once; every row copies it
    stop = set(eng.tokenizer.stop_ids)
    if args.questions:  # the target's own questions (train draft-questions)
        questions = file_prompts(Path(args.questions))
    else:
        questions = data_prompts(args.n_prompts, seed=args.seed)
    if args.check:
        return _check(eng, _jobs(questions[: args.check], render), args, stop)
    meta = shard.Manifest(model, cfg.llm.weights, prefix, args.max_new, sorted(stop))
    store = shard.Shard.open(out, meta)
    done = store.ids()
    todo = [q for q in questions if shard.prompt_id(q) not in done]
    prog = _Progress(len(questions) - len(todo), len(questions))
    print(f"{out}: {len(done)} replies in the shard, {len(todo)} prompts to go", flush=True)
    buf: list[shard.Reply] = []
    jobs = (shard.Reply.ask(q, render(q)) for q in todo)
    feats_dir = Path(args.with_features) if args.with_features else None
    samples: dict[str, dict[str, Any]] = {}  # the buffered replies' (--with-features)

    def record(r: shard.Reply, feats: Any) -> None:
        samples[r.pid] = draft_features.trim(draft_features.of_feats(feats, r), args.prompt_ctx)

    def flush() -> None:
        part = store.append(buf, len(prefix))
        if feats_dir is not None:
            draft_features.save(feats_dir, part, [samples.pop(r.pid) for r in buf])

    rec = record if feats_dir is not None else None
    for r in batched_replies(eng, jobs, args.rows, args.max_new, stop, rec):
        buf.append(r)
        prog.add(r)
        if len(buf) >= args.flush:
            flush()
            buf = []
            print(prog.line(), flush=True)
    if buf:
        flush()
    print(prog.line(), flush=True)
    return 0


def _check(eng: Any, jobs: list[shard.Reply], args: argparse.Namespace, stop: set[int]) -> int:
    """Batched and one-at-a-time replies to the same prompts, same process: rates and
    whether every reply is token-identical (JSON; exit 1 if not). The prompts are run in
    two halves, batched then single, then single then batched (ABBA), so a load that
    rises or falls over the run weighs on both alike."""
    import os

    res: dict[str, Any] = {"model": args.model or args.config.llm.model, "prompts": len(jobs),
                           "rows": args.rows, "max_new": args.max_new}  # fmt: skip
    runs = {
        "batched": lambda js: batched_replies(eng, js, args.rows, args.max_new, stop),
        "single": lambda js: single_replies(eng, js, args.max_new, stop),
    }
    got: dict[str, list[shard.Reply]] = {"batched": [], "single": []}
    secs = {"batched": 0.0, "single": 0.0}
    half = (len(jobs) + 1) // 2
    for part, order in ((jobs[:half], ("batched", "single")), (jobs[half:], ("single", "batched"))):
        for name in order:
            t = time.perf_counter()
            got[name] += list(runs[name](part))
            secs[name] += time.perf_counter() - t
    for name, dt in secs.items():
        n = sum(len(r.reply) for r in got[name])
        res[name] = {"tokens": n, "time_s": round(dt, 2), "tok_s": round(n / dt, 2),
                     "replies_h": round(len(jobs) / dt * 3600)}  # fmt: skip
    b = {r.pid: r.reply for r in got["batched"]}
    same = sum(b[r.pid] == r.reply for r in got["single"])
    res["identical"] = f"{same}/{len(jobs)}"
    res["batched_vs_single"] = round(res["batched"]["tok_s"] / res["single"]["tok_s"], 2)
    res["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(res))
    return 0 if same == len(jobs) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "draft-data",
        help="the LLM's own greedy replies at batch speed, into a committable shard (resumes)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="", help="target model (default: config llm.model)")
    p.add_argument(
        "--out", default="", help="shard dir (default data/draft/<model>/ in the repository)"
    )
    p.add_argument(
        "--n-prompts", type=int, default=40000, help="prompts of the data set (default 40000)"
    )
    p.add_argument("--seed", type=int, default=0, help="prompt order seed (default 0)")
    p.add_argument(
        "--questions",
        default="",
        metavar="FILE",
        help="answer the questions of FILE (written by train draft-questions; benchmark "
        "prompts dropped) instead of the built-in prompt series",
    )
    p.add_argument("--rows", type=int, default=8, help="replies in flight per pass (default 8)")
    p.add_argument("--max-new", type=int, default=160, help="reply token cap (default 160)")
    p.add_argument("--max-len", type=int, default=1024, help="KV cache positions per row")
    p.add_argument("--flush", type=int, default=64, help="replies per shard part and progress line")
    p.add_argument(
        "--check",
        type=int,
        default=0,
        help="instead: decode the first N prompts batched and one at a time, print both "
        "rates and whether the replies are token-identical (JSON); writes nothing",
    )
    p.add_argument(
        "--features",
        default="",
        metavar="DIR",
        help="instead: recompute the target's features along the shard's replies into DIR "
        "as train draft's gen files (gen_NNNN.pt, one per shard part; for --stage fit "
        "--data DIR); parts already converted are skipped",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="with --features: fused-kernel threads of each reply's pass (default 1, "
        "leaving a core to a generator beside it; 2 on an otherwise idle host)",
    )
    p.add_argument(
        "--with-features",
        default="",
        metavar="DIR",
        help="while generating, also write each new part's target features into DIR as "
        "--features would (the passes compute them anyway: no extra pass, ~100 s a part "
        "saved); parts made before still need --features",
    )
    p.add_argument(
        "--prompt-ctx",
        type=int,
        default=64,
        help="with --features or --with-features: keep each reply's last N prompt tokens "
        "and their features (default 64; 0: the whole prompt, ~105 MB a part with the "
        "served system prompt; train draft reads 12)",
    )
    p.set_defaults(func=_handler)


def _handler(args: argparse.Namespace) -> int:
    if args.rows < 1 or args.flush < 1 or args.max_new < 1 or args.threads < 1:
        print("--rows, --flush, --max-new and --threads must be at least 1", file=sys.stderr)
        return 2
    if args.prompt_ctx < 0:
        print("--prompt-ctx must be 0 (the whole prompt) or more", file=sys.stderr)
        return 2
    if args.questions and not Path(args.questions).is_file():
        print(
            f"--questions {args.questions}: no such file (voicepipe train draft-questions "
            "writes one)",
            file=sys.stderr,
        )
        return 2
    return run(args)
