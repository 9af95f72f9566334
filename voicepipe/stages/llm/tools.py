"""The LLM stage's tool round trip: which tools a session has, running calls, alerts.

Not a stage: the async shell around ``voicepipe/tools.py`` (the tools) and
``voicepipe/core/tools.py`` (the call format); ``LlmStage`` holds a ``SessionTools``
and its local engine (stages/llm/local.py) runs the rounds. Tools are on when ``[tools]
enabled`` and the model's chat template renders tools (``ChatTokenizer.
supports_tools``); otherwise the stage runs exactly as without this module.

A call runs in a worker thread, bounded by ``[tools] timeout_s``; its result
(or its error, as JSON the model can read) becomes the ``tool`` message the
template renders back. A tool that schedules an alert (``set_timer``) does so
through ``Alerts``: when it is due, an ``Alert`` frame goes into the stage's own
inbox, so it is spoken after the reply in progress, never inside it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from voicepipe.config import Config
from voicepipe.core.tools import OPEN, BadCall, ToolCall
from voicepipe.frames import Alert, ToolCallOut
from voicepipe.speculative import jump, skeleton
from voicepipe.speculative.drafter import Tunings
from voicepipe.speculative.hybrid import HybridProposer
from voicepipe.stages.llm.context import Conversation
from voicepipe.stages.llm.reply import Reply
from voicepipe.tools import Toolbox

log = logging.getLogger(__name__)
_RESULT_CHARS = 300  # of a tool's result kept in the llm.tool span
_WARNED: set[str] = set()
# Tool-call skeletons per tokenizer and tool set (stateless: sessions share them).
_SKELETONS: dict[tuple[int, str], tuple[Any, skeleton.SkeletonProposer | None]] = {}
_SKELETONS_MAX = 32  # distinct client tool sets kept
# Jump-forward proposers per tokenizer, tool set and mode (stateless as well).
_JUMPS: dict[tuple[int, str, str], tuple[Any, jump.JumpProposer | None]] = {}


def active_tools(cfg: Config, tokenizer: Any) -> Toolbox | None:  # tokenizer: ChatTokenizer
    """The session's tools, or None when they are off (by config or by the template).
    Raises ``voicepipe.tools.ToolError`` for a bad tool name: a config error."""
    if not cfg.tools.enabled:
        return None
    if not getattr(tokenizer, "supports_tools", False):
        if cfg.llm.model not in _WARNED:  # once per model and process, not per session
            _WARNED.add(cfg.llm.model)
            log.info("tools off: the chat template of %s does not render tools", cfg.llm.model)
        return None
    box = Toolbox.build(cfg.tools.builtin, cfg.tools.user)
    return box if box.tools else None


def system_prompt(cfg: Config, tools: Toolbox | None) -> str:
    """The configured system prompt; ``[tools] system_prompt`` instead while tools are on."""
    return (cfg.tools.system_prompt or cfg.llm.system_prompt) if tools else cfg.llm.system_prompt


def tag_ids(tokenizer: Any) -> frozenset[int]:
    """The special tokens the stage must see as text (the call tags)."""
    ids = (tokenizer.id_of(OPEN), tokenizer.id_of("</tool_call>"))
    return frozenset(i for i in ids if i is not None)


def use_skeletons(engine: Any, specs: list[dict[str, Any]] | None) -> None:
    """Draft tool calls' JSON from ``specs`` (speculative/skeleton.py) in front of a hybrid
    drafter's lookup; ``specs`` None (tools off): stop. Other drafters: nothing."""
    prop = getattr(engine, "proposer", None)
    if not isinstance(prop, HybridProposer):
        return
    if not specs:
        prop.skeleton = None
        return
    tok = engine.tokenizer
    key = (id(tok), json.dumps(specs, sort_keys=True))
    got = _SKELETONS.get(key)
    if got is None or got[0] is not tok:  # (an id reused by another tokenizer)
        if len(_SKELETONS) >= _SKELETONS_MAX:
            _SKELETONS.clear()
        tunings = getattr(getattr(engine, "drafter", None), "tunings", None) or Tunings()
        try:
            built = skeleton.build(tok, specs, tunings.skeleton_min_n)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            # An odd client schema costs the drafts, never the reply.
            log.warning("no tool-call drafts for these tools: %r", e)
            built = None
        got = _SKELETONS[key] = (tok, built)
    prop.skeleton = got[1]


def jump_forcer(engine: Any, specs: list[dict[str, Any]] | None, mode: str) -> Any:
    """The decoder's forcer for a tool call's fixed text (speculative/jump.py), or None:
    tools off, ``mode`` "off", or an engine without a chat tokenizer."""
    tok = getattr(engine, "tokenizer", None)
    if not specs or mode == "off" or tok is None or not hasattr(tok, "chat_ids"):
        return None
    key = (id(tok), mode, json.dumps(specs, sort_keys=True))
    got = _JUMPS.get(key)
    if got is None or got[0] is not tok:
        if len(_JUMPS) >= _SKELETONS_MAX:
            _JUMPS.clear()
        try:
            built = jump.build(tok, specs, certain=mode == "certain")
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            log.warning("tool calls decoded without forcing for these tools: %r", e)
            built = None
        got = _JUMPS[key] = (tok, built)
    return got[1]


class Alerts:
    """Timers of one session: ``alert_in`` (a ToolContext) is called from a tool's worker
    thread; when due, ``deliver`` gets an ``Alert`` frame on the event loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Callable[[Alert], Coroutine[Any, Any, None]],
        turn: Callable[[], int],
    ) -> None:
        self.loop = loop
        self.deliver = deliver
        self.turn = turn
        self._ids = itertools.count(1)
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def alert_in(self, seconds: float, text: str, data: dict[str, Any]) -> str:
        timer_id = f"t{next(self._ids)}"
        self.loop.call_soon_threadsafe(self._schedule, timer_id, seconds, text, data)
        return timer_id

    def _schedule(self, timer_id: str, seconds: float, text: str, data: dict[str, Any]) -> None:
        self._handles[timer_id] = self.loop.call_later(
            seconds, self._fire, timer_id, text, {**data, "id": timer_id}
        )

    def _fire(self, timer_id: str, text: str, data: dict[str, Any]) -> None:
        self._handles.pop(timer_id, None)
        frame = Alert(turn_id=self.turn(), kind="timer", text=text, data=data)
        task: asyncio.Task[None] = self.loop.create_task(self.deliver(frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def pending(self) -> int:
        return len(self._handles)

    def cancel_all(self) -> None:
        for h in self._handles.values():
            h.cancel()
        self._handles.clear()
        for t in self._tasks:
            t.cancel()


class SessionTools:
    """One session's tools: the toolbox (None: off) and the timers its calls set."""

    def __init__(
        self,
        cfg: Config,
        deliver: Callable[[Alert], Coroutine[Any, Any, None]],
        turn: Callable[[], int],
    ) -> None:
        self.cfg = cfg
        self.box: Toolbox | None = None
        self._deliver = deliver  # the stage's inbox: an alert is spoken after the reply
        self._turn = turn
        self._alerts: Alerts | None = None

    def setup(self, tokenizer: Any, conv: Conversation) -> None:
        """Tools on or off for this engine's tokenizer (None: a remote model, off), and the
        conversation's tools block and system prompt to match."""
        self.box = active_tools(self.cfg, tokenizer) if tokenizer is not None else None
        conv.set_tools(
            self.box.specs() if self.box else [], getattr(tokenizer, "supports_tools", False)
        )
        conv.set_system(system_prompt(self.cfg, self.box))

    def context(self) -> Alerts:
        """The calls' ToolContext, on the running event loop."""
        if self._alerts is None or self._alerts.loop is not asyncio.get_running_loop():
            # (``voicepipe chat`` runs each turn in its own event loop)
            self._alerts = Alerts(asyncio.get_running_loop(), self._deliver, self._turn)
        return self._alerts

    def close(self) -> None:
        if self._alerts is not None:
            self._alerts.cancel_all()  # a session's timers end with it


async def client_calls(
    r: Reply, calls: list[ToolCall | BadCall], said: str, names: frozenset[str]
) -> bool:
    """Calls of client tools (``names``) end the reply: each goes out as a ``ToolCallOut``
    and the conversation keeps the call message (built-in calls of the same round are
    dropped: the model sees them again, if it still wants them, after the client's
    results)."""
    mine = [c for c in calls if isinstance(c, ToolCall) and c.name in names]
    if not mine:
        return False
    r.ends_in_call = True
    r.tool_msgs.append(
        {"role": "assistant", "content": said, "tool_calls": [c.for_template() for c in mine]}
    )
    for c in mine:
        args = json.dumps(c.arguments, ensure_ascii=False)
        await r.emit(ToolCallOut(turn_id=r.turn, name=c.name, arguments=args))
    return True


@dataclass
class Round:
    """One tool round of a reply: the calls the model made and what they returned."""

    started_ns: int  # the first token of the first call
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # calls that were not JSON calls
    results: list[dict[str, Any]] = field(default_factory=list)
    run_ms: float = 0.0
    filler: bool = False  # a filler was said while a call ran
    spoken: bool = False  # answered from the tools' templates, no model round
    # The model pass that wrote the calls (any words before them included): its tokens,
    # those forced from the schemas (jump-forward, speculative/jump.py), its target passes
    # (the prompt's pass that chose its first token counted).
    tokens: int = 0
    forced: int = 0
    passes: int = 0

    def messages(self, said: str) -> list[dict[str, Any]]:
        """The assistant's tool-call message and one ``tool`` message per result, as the
        chat template renders them (``said``: the text before the calls, if any)."""
        msgs: list[dict[str, Any]] = [
            {"role": "assistant", "content": said,
             "tool_calls": [c.for_template() for c in self.calls]},
        ]  # fmt: skip
        msgs += [{"role": "tool", "content": r["content"]} for r in self.results]
        return msgs

    def span_attrs(self) -> dict[str, Any]:
        return {
            "tool": ",".join(c.name for c in self.calls),
            "calls": [
                {
                    "name": c.name,
                    "arguments": c.arguments,
                    "ok": r["ok"],
                    "result": r["content"][:_RESULT_CHARS],
                }
                for c, r in zip(self.calls, self.results, strict=False)  # then bad calls' errors
            ],  # fmt: skip
            "bad_calls": len(self.errors),
            "run_ms": round(self.run_ms, 3),
            "filler": self.filler,
            "spoken": self.spoken,  # the answer from the tools' templates
            "call_tokens": self.tokens,
            "forced_tokens": self.forced,
            "decoded_tokens": self.tokens - self.forced,
            "passes": self.passes,
            "passes_per_call": round(self.passes / max(1, len(self.calls) + len(self.errors)), 2),
        }

    def spoken_answer(self, box: Toolbox, unknown: str = "", speak: bool = True) -> str | None:
        """The round's answer without the model: ``unknown`` when every call names a tool
        there is not; with ``speak``, said by the tools themselves (every call answered,
        each by a tool with ``speak``); else None: the model reads the results."""
        if self.errors or not self.calls or len(self.results) != len(self.calls):
            return None
        if unknown and all(c.name not in box.tools for c in self.calls):
            return unknown
        if not speak:
            return None
        parts = []
        for call, res in zip(self.calls, self.results, strict=True):
            text = box.spoken(call, res["content"]) if res["ok"] else None
            if text is None:
                return None
            parts.append(text)
        return " ".join(parts)


async def run_round(
    box: Toolbox,
    rnd: Round,
    ctx: Alerts,
    timeout_s: float,
    filler: Callable[[], Coroutine[Any, Any, None]] | None = None,
    filler_after_s: float = 0.0,
) -> None:
    """Run every call of the round, in order, each in a worker thread. A call still
    running after ``filler_after_s`` (> 0) gets ``filler`` said once per round, so a
    slow tool never means dead air."""
    t0 = time.perf_counter()
    filled = filler is None or filler_after_s <= 0
    for call in rnd.calls:
        task = asyncio.ensure_future(
            asyncio.wait_for(asyncio.to_thread(box.call, call, ctx), timeout=timeout_s)
        )
        try:
            if not filled:
                done, _ = await asyncio.wait({task}, timeout=filler_after_s)
                if not done:
                    filled = True
                    rnd.filler = True
                    assert filler is not None
                    await filler()
            ok, content = await task
        except TimeoutError:
            ok, content = False, json.dumps({"error": f"{call.name} took over {timeout_s:g} s"})
        finally:
            task.cancel()  # (an interrupted reply: stop waiting; a finished task: no-op)
        rnd.results.append({"ok": ok, "content": content})
    for err in rnd.errors:  # tell the model its malformed call went nowhere, and what works
        # (told only "bad call", the 1.5B gave up and said it could not help)
        fix = (
            f"bad tool call ({err}). Call again: a JSON object "
            '{"name": <function-name>, "arguments": <args-json-object>} within '
            f"<tool_call></tool_call> tags; the functions are {', '.join(box.tools)}."
        )
        rnd.results.append({"ok": False, "content": json.dumps({"error": fix})})
    rnd.run_ms = (time.perf_counter() - t0) * 1e3
