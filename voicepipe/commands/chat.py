"""`voicepipe chat [--stats] [--once TEXT]`: a text REPL over the speculative LLM stage."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chat",
        help="chat with the LLM in the terminal (streams replies)",
        description=(
            "Type a message, get the assistant's reply streamed token by token, exactly as "
            "the voice pipeline's LLM stage produces it (same system prompt, memory, "
            "speculative decoding). Model, weights and drafter come from the [llm] config: "
            "e.g. --llm.drafter=none --llm.weights=int4 --llm.temperature=0.7. "
            "Empty line or Ctrl-D quits; /reset forgets the conversation."
        ),
    )
    p.add_argument(
        "--stats",
        action="store_true",
        help="after each reply, print speed and "
        "speculation stats (acceptance rate, mean accepted length, by position)",
    )
    p.add_argument(
        "--once",
        metavar="TEXT",
        default=None,
        help="send one message, print the reply, exit (no REPL)",
    )
    p.add_argument(
        "--chunks",
        action="store_true",
        help="mark where the chunker hands clauses to the TTS with ' | '",
    )
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import time

    import torch

    from voicepipe.frames import Frame, TextChunk, TextDelta
    from voicepipe.registry import ModelError
    from voicepipe.stages.llm.engine import engine_for
    from voicepipe.stages.llm.stage import LlmStage
    from voicepipe.tools import ToolError

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = args.config
    try:
        t0 = time.perf_counter()
        engine = engine_for(cfg)
    except (ModelError, FileNotFoundError, ToolError) as e:
        print(f"voicepipe chat: {e}", file=sys.stderr)
        return 2
    print(
        f"[{cfg.llm.model} {cfg.llm.weights}, drafter {cfg.llm.drafter}, "
        f"loaded in {time.perf_counter() - t0:.1f} s]",
        file=sys.stderr,
    )
    stage = LlmStage(cfg, engine)

    async def show(frame: Frame) -> None:
        if isinstance(frame, TextDelta) and not args.chunks:
            sys.stdout.write(frame.text)
            sys.stdout.flush()
        elif isinstance(frame, TextChunk) and args.chunks and frame.text:
            sys.stdout.write(frame.text + " | ")
            sys.stdout.flush()

    stage.push = show

    def one(text: str, turn: int) -> None:
        t = time.perf_counter()
        asyncio.run(stage.reply(turn, text))
        dt = time.perf_counter() - t
        print()
        if args.stats:
            m = stage.last_metrics
            n = int(m.get("tokens", 0))
            by_pos = ", ".join(f"{x:.2f}" for x in m.get("accept_by_pos", []))  # type: ignore[union-attr]
            print(
                f"[{n} tokens in {dt:.2f} s = {n / dt:.1f} tok/s; tpot {m.get('tpot_ms', 0)} ms; "
                f"acceptance {m['acceptance_rate']}, mean accepted length "
                f"{m['mean_accepted_len']}, by position [{by_pos}]; propose "
                f"{m['time_propose_ms']} ms, score {m['time_score_ms']} ms, verify "
                f"{m['time_verify_ms']} ms]",
                file=sys.stderr,
            )

    if args.once is not None:
        one(args.once, 1)
        return 0
    turn = 0
    while True:
        try:
            text = input("> " if sys.stdin.isatty() else "").strip()
        except EOFError:
            break
        if not text:
            break
        if text == "/reset":
            del stage.messages[1 if cfg.llm.system_prompt else 0 :]
            continue
        turn += 1
        one(text, turn)
    return 0
