"""A separate P(end of the user's turn) model (``[turns] p_end_model``), instead of the
reply LLM's own reading (stages/llm/ahead.py).

Not a stage: what ``LlmStage`` holds when the key is set. The semantic end of turn
(core/turns/semantic.py) waits, after each pause, for P(the chat template's
end-of-user-turn token) after the words so far. Read from the default reply LLM (the 1.5B)
that is a pass of 7–12 rows of the 1.5B, 160–260 ms on a quiet host, on the path from
the user's last word to the answer. The 135M separates finished from unfinished
transcripts as well as anything measured (``voicepipe bench eot``: AUC 1.000) in a fresh
session, no conversation needed, and its pass over the words is ~30 ms (11 rows, two
threads, measured on a busy host; 60–78 ms p50 as `turns.p_end` under `bench turns`).
Separating is not calibrating, though: the thresholds (core/turns/semantic.py) give 94 %
of the finished transcripts the short pause on the 1.5B's reading and 64 % on the 135M's,
and a finished request Whisper writes without a final mark often reads low on the 135M,
so it waits far longer; hence off by default (docs/benchmarks/turns.md).

So one estimator per process and model: the GGUF model (its weights shared with any
engine of the same model and format in the process), one short KV cache holding the
rendered system prompt and the user header, which every call keeps, and a lock (one pass
at a time; a pass is a few milliseconds). A call renders system prompt + user header +
the words, cuts it before the template's end-of-user-turn token, and reads that token's
probability (with the tokenizer's stop tokens) from the last row's logits: the same
prompt and reading as the reply LLM's streaming prefill makes in a fresh session of the
same model, so with the fast profile's 135M the figures of ``bench eot`` are the same
(tests/stages/llm/test_p_end.py).

The system prompt is fixed, ``SYSTEM_PROMPT``: the fast profile's (configs/fast.toml),
the one the semantic end of turn's thresholds were chosen with (``bench eot`` on the
135M), and short (23 tokens kept in the cache). Not ``[llm] system_prompt``: the default's
is four sentences about tools, and a session's own instructions do not change how
finished its words sound.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.tokens import common_prefix, common_suffix
from voicepipe.core.turns.semantic import EndOfTurnBoard, p_end_read

log = logging.getLogger(__name__)

# Positions of the estimator's KV cache: the system prompt (~25 tokens for the 135M) and
# the last words of the transcript. P(end) is read from the end of the words; what was
# said 150 tokens before barely moves it, and a short cache is a small one.
MAX_LEN = 256
WEIGHTS = "int4"  # the GGUF's own Q4_1 grid (the fast profile's)
THREADS = 2  # for a pass run alone; the thread budget gives one when others run
SYSTEM_PROMPT = "You are a helpful voice assistant. Answer in one to three short spoken sentences."

_SHARED: dict[str, PEndEstimator] = {}
_SHARED_LOCK = threading.Lock()


class PEndEstimator:
    """P(end) of a transcript, from ``name`` (an LLM's registry name or path)."""

    def __init__(
        self, name: str, system_prompt: str = SYSTEM_PROMPT, max_len: int = MAX_LEN
    ) -> None:
        from voicepipe.nn.llm.engine import gguf_path, shared_model
        from voicepipe.nn.llm.target import ModelTarget
        from voicepipe.nn.llm.tokenizer import ChatTokenizer

        self.name = name
        self.system_prompt = system_prompt
        # (2048: the length an engine of this model loads it with, so the weights are the
        # same object: a process serving the 135M holds them once)
        model, _ = shared_model(gguf_path(name), WEIGHTS, 2048)
        self.tokenizer = ChatTokenizer(model.metadata)
        self.target = ModelTarget(model, max_len=max_len)
        self.target.prefixes = None  # its own cache keeps the prefix: no process-wide copy
        self.target.prefill_threads = THREADS
        self.lock = threading.Lock()
        self.calls = 0
        a, b = self._render("Hello."), self._render("2")
        self.prefix = a[: common_prefix(a, b)]  # system prompt + user header
        n = common_suffix(a, b)  # after a user message's words: end of turn, header
        if n <= 0:
            raise ValueError(f"{name}: its chat template ends a user message with no token")
        self._suffix = n
        self._end_id = a[-n]  # the end of the user's message (<|im_end|> for ChatML)
        self.stops = frozenset(self.tokenizer.stop_ids) | {self._end_id}
        self.target.prefill(self.prefix)  # the prefix every call keeps

    def _render(self, text: str) -> list[int]:
        head = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return list(self.tokenizer.chat_ids([*head, {"role": "user", "content": text}]))

    def prompt(self, text: str) -> list[int]:
        """System prompt + user header + ``text``'s words, cut before the end of the user's
        message; from the first word on that fits the cache when the text is long."""
        words = text.split()
        while True:
            ids = self._render(" ".join(words))[: -self._suffix]
            if len(ids) < self.target.max_len or len(words) <= 1:
                return ids[: self.target.max_len - 1]
            words = words[len(words) // 4 or 1 :]  # drop the oldest quarter, try again

    def estimate(self, text: str) -> float:
        """P(the user's message ends after ``text``), the model's alone (no cue rule:
        core/turns/semantic.py ``p_end_read`` applies that)."""
        from voicepipe.stages.llm.ahead import end_probability

        ids = self.prompt(text.strip())
        with self.lock:
            logits = self.target.prefill(ids)  # only what follows the kept prefix runs
            self.target.rollback(len(self.prefix))
            self.calls += 1
        return end_probability(logits, self.stops)

    async def estimate_async(self, text: str) -> float:
        return await asyncio.to_thread(self.estimate, text)


def estimator_for(cfg: Config) -> PEndEstimator | None:
    """The process's estimator for ``[turns] p_end_model`` (None: the key is empty)."""
    name = cfg.turns.p_end_model
    if not name:
        return None
    with _SHARED_LOCK:
        est = _SHARED.get(name)
        if est is None:
            est = _SHARED[name] = PEndEstimator(name)
        return est


async def on_pause(
    est: PEndEstimator, board: EndOfTurnBoard, turn: int, text: str, speech_end_media_ns: int
) -> tuple[float | None, dict[str, float]]:
    """The pause's transcript: its P(end) posted to ``board`` (with the cue rule,
    ``p_end_read``), or a refusal when there are no words or the pass failed, so the
    endpointer never waits for an answer that will not come. Returns (the model's P(end)
    or None, where the time went in ms: ``pass_ms``, ``post_ms``)."""
    t0 = now_ns()
    p = None
    text = text.strip()
    if text:
        try:
            p = await est.estimate_async(text)
        except Exception as e:  # a failed estimate costs the turn its semantic pause only
            log.warning("P(end) from %s failed: %r", est.name, e)
    t1 = now_ns()
    if p is None:
        board.decline(turn, speech_end_media_ns, est.name)
    else:
        board.post(turn, speech_end_media_ns, p_end_read(p, text), text, est.name)
    return p, {"pass_ms": (t1 - t0) / 1e6, "post_ms": (now_ns() - t0) / 1e6}
