"""TOML configuration → frozen dataclasses, with ``--section.key=value`` overrides.

The dataclass defaults below are the built-in defaults; ``configs/default.toml``
spells the same values out (a test keeps the two equal). An unknown section or
key, or a value of the wrong type, raises ``ConfigError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    pipeline: str = "assistant"
    max_sessions: int = 8
    # A connection is not a session until its hello is accepted: until then it waits in a
    # pool of its own (the oldest is evicted when full), for hello_timeout_s at most.
    max_pending: int = 64
    max_pending_per_address: int = 16
    max_sessions_per_address: int = 0  # 0: only max_sessions bounds one address
    hello_timeout_s: float = 5.0
    handshake_timeout_s: float = 10.0  # for each HTTP request head and POST body (slowloris)
    retry_after_s: float = 5.0  # the hint sent with "too many sessions"
    max_message_bytes: int = 1 << 20
    idle_timeout_s: float = 60.0
    # A client that takes longer than this to accept one message (it stopped reading)
    # is closed, so it holds no slot and no memory.
    send_timeout_s: float = 10.0
    # SIGTERM / Ctrl-C: stop accepting, let replies in flight finish for at most this long.
    drain_timeout_s: float = 30.0
    auth_token: str = ""
    # Empty list: only the server's own host (and non-browser clients) may connect.
    allowed_origins: list[str] = field(default_factory=list)
    web_root: str = ""  # empty: the web/ folder next to the package
    # A model call uses several threads (a prompt pass, a vocoder push) only when it runs
    # alone and at most one session is mid-reply; else one (voicepipe/nn/threads.py).
    # false: every call its own configured count, however many run at once.
    adaptive_threads: bool = True
    # Voice before text: while a voice turn is in flight, the /v1 API's model steps keep
    # this share of the time (stages/llm/voice_first.py); 1: no priority; 0: the API waits
    # for voice turns (at most 5 s between two of its steps; docs/DEPLOY.md, measured).
    api_share_while_voice: float = 0.0


@dataclass(frozen=True)
class AudioConfig:
    asr_sample_rate: int = 16000  # what VAD and ASR consume
    output_sample_rate: int = 22050  # what the TTS produces (HiFi-GAN)
    frame_ms: int = 20  # wire frame length for reply audio
    # Cancel the assistant's own voice in the microphone before VAD and ASR (speexdsp's
    # echo canceller fed what the client played, aligned by its playback reports:
    # stages/echo.py). Needs libspeexdsp1; where it does not load, the input goes on
    # uncancelled (a log line says so).
    echo_cancel: bool = True
    # The canceller's filter: longer than the echo path's delay + the room's reverberation
    # + the error of the alignment (the client's playout delay, event-loop stalls).
    echo_tail_ms: int = 300

    def __post_init__(self) -> None:
        if not 20 <= self.echo_tail_ms <= 2000:
            raise ConfigError(f"audio.echo_tail_ms: expected 20 to 2000, got {self.echo_tail_ms}")


@dataclass(frozen=True)
class VadConfig:
    threshold: float = 0.5
    chunk_ms: int = 32
    start_ms: int = 32  # consecutive speech before SpeechStart (barge-in waits on it)
    min_speech_ms: int = 200
    end_silence_ms: int = 400
    max_utterance_s: float = 20.0


@dataclass(frozen=True)
class AsrConfig:
    model: str = "whisper-tiny.en"
    compute_type: str = "int8"
    # CTranslate2's threads for a decode. tiny.en decodes faster on one than on two (Zen 4,
    # 2026-11-28, `bench turns --variant asr.threads=2 --variant asr.threads=1`: pause
    # decodes 58-85 against 63-96 ms, the same text), and the other core stays the LLM's.
    threads: int = 1
    # Beam search for the decodes that become text the LLM reads (finals, early finals,
    # pause decodes); partials, re-decoded every partial_interval_ms, stay greedy.
    beam_size: int = 1
    partial_beam_size: int = 1
    language: str = "en"
    partial_interval_ms: int = 400
    # Whisper's window = the utterance + this much padding instead of a fixed 30 s:
    # the encoder's cost scales with the window.
    window_pad_s: float = 3.0
    no_speech_threshold: float = 0.6  # drop a decode whose no-speech probability is above
    # Trailing silence after which the final is decoded ahead; below turns.preempt_after_ms
    # the decode overlaps the pause and its text goes out as the stable one at that mark.
    early_final_ms: int = 64
    # Audio after the last speech chunk that a final or pause decode sees (at least
    # early_final_ms): the endpoint silence beyond it is left out of Whisper's window.
    # 96 = where an early final's cutoff lands (64 ms, rounded up to the 32 ms VAD chunk):
    # on the hard set 64 lost words (WER 37.7 % against 35.0 % at 96..400 in lockstep).
    tail_ms: int = 96
    # One decode at a time per process, finals and pause decodes before every session's
    # partials (schedulers/asr_gate.py); false: each session's decodes queue in arrival order.
    decode_priority: bool = True


@dataclass(frozen=True)
class TurnsConfig:
    # Preemptive generation: once the user has been silent preempt_after_ms, the LLM starts
    # its reply on the ASR's transcript so far, while the endpointer still waits for
    # vad.end_silence_ms; the reply is released when the final transcript agrees and
    # dropped when it does not (or the user speaks on). See docs/BENCHMARKS.md (bench e2e).
    preempt: bool = True
    # 64 = asr.early_final_ms: the pause's text goes out the moment its decode is done, so
    # the LLM's pass over it (P(end), the reply's prompt) starts then, not at a fixed mark
    # after it (160 until 2026-11-28: on this Zen 4 the decode ends 120-150 ms in; a
    # complete turn's end 12-35 ms sooner on `bench turns --set tuning`, no paused turn
    # more cut, no decode more: below early_final_ms it would add one a pause).
    preempt_after_ms: int = 64
    # Barge-in during a reply by words, not speech onset alone (core/turns/overlap.py): a
    # backchannel ("mm-hmm", a cough) or the assistant's own echo lets the reply go on;
    # false: any speech onset cuts the reply.
    backchannel: bool = True
    # Speech during a reply still undecided by its words after this long interrupts.
    overlap_max_wait_ms: int = 1500
    # While the judge listens to speech over a reply, the reply is paused (the server
    # stops sending it; the client plays out what it holds): a backchannel or echo resumes
    # it where it stopped, an interruption cuts it. false: the reply plays on meanwhile.
    pause_on_speech: bool = True
    # Echo gating: the reply's words played within this long before the overlapping
    # speech began (and since) are the reference its transcript is compared with.
    echo_words_ms: int = 2000
    # Speech over a reply this many dB quieter than the user's usual voice (their last
    # turns') is the echo canceller's residue, whatever words Whisper made of it
    # (core/turns/level.py); 0: words alone decide.
    echo_quiet_gap_db: float = 10.0
    # Streaming prefill (stages/llm/ahead.py): the words the partial transcripts agree on
    # go into the LLM's KV cache while the user still speaks, in passes that yield to
    # replies; the endpoint then leaves only the last words and the assistant header.
    prefill_ahead: bool = True
    # Semantic end of turn (core/turns/semantic.py): the pause that ends a turn depends on
    # the LLM's P(end of the user's turn) read by the prefill of the pause's transcript.
    # off (silence only: vad.end_silence_ms) | low | medium | high | auto (= medium).
    # Needs prefill_ahead and the local LLM (or p_end_model); else the silence rule alone.
    eagerness: str = "auto"
    # Where P(end) comes from: "" = the reply LLM's own pass over the pause's words; a GGUF
    # LLM's registry name or path (e.g. "smollm2-135m") = that model in a fresh session
    # (system prompt + user header + the words: stages/llm/p_end.py), one instance per
    # process, while the reply LLM still prefills the words for the reply. Off by default:
    # with the 1.5B replying, the 135M's estimate came ~8x sooner but its lower P(end) on
    # finished requests raised complete turns' delay p95 (docs/benchmarks/turns.md).
    p_end_model: str = ""

    def __post_init__(self) -> None:
        names = ("off", "low", "medium", "high", "auto")
        if self.eagerness not in names:
            raise ConfigError(
                f"turns.eagerness: expected one of {', '.join(names)}, got {self.eagerness!r}"
            )
        if self.echo_quiet_gap_db < 0:
            raise ConfigError(
                f"turns.echo_quiet_gap_db: expected 0 (off) or more, got {self.echo_quiet_gap_db}"
            )
        m = self.p_end_model
        if m and not _an_llm(m):
            raise ConfigError(
                f'turns.p_end_model: expected "" (the reply LLM\'s own P(end)), an LLM of '
                f"the registry ({', '.join(_registry_llms())}), a path or hf:ORG/NAME; "
                f"got {m!r}"
            )


_MODELS_DIR = Path(__file__).resolve().parent.parent / "models"


def _registry_llms() -> list[str]:
    """The registry's LLM names (models/*.toml with role "llm"), read here rather than
    through voicepipe.registry, which imports this module."""
    out = []
    for f in sorted(_MODELS_DIR.glob("*.toml")):
        try:
            role = tomllib.loads(f.read_text()).get("role")
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if role == "llm":
            out.append(f.stem)
    return out


def _an_llm(name: str) -> bool:
    """Could ``name`` name an LLM to load: a registry LLM, an existing path, hf:ORG/NAME."""
    if name != name.strip() or not name:
        return False
    if name.startswith("hf:"):
        return "/" in name
    return name in _registry_llms() or Path(name).expanduser().exists()


@dataclass(frozen=True)
class LlmConfig:
    # local: voicepipe's own speculative engine; openai: stream from an OpenAI-compatible
    # server at base_url (stages/llm/remote.py), `model` naming the model there.
    backend: str = "local"
    # Qwen2.5-Coder-1.5B-Instruct answers 96 % of bench answers right (SmolLM2-135M: 41 %)
    # and renders tools; the 135M is the fast profile (configs/fast.toml). docs/BENCHMARKS.md.
    model: str = "qwen2.5-coder-1.5b"
    base_url: str = "http://127.0.0.1:8080/v1"  # backend = "openai" only
    api_key: str = ""  # backend = "openai": empty = $OPENAI_API_KEY, else none
    weights: str = "int4"  # fp32 | bf16 | int8 | int4 (int4 = the GGUF's own Q4_1 grid)
    # Prompt lookup, the reply store, then the 1.5B's EAGLE draft: on the 2-core AVX2 host
    # voice to voice p50 1,229 ms against 1,471 plain (bench e2e, docs/benchmarks/e2e.md);
    # replies are token-identical to plain decoding.
    drafter: str = "ngram+qwen2.5-coder-1.5b-draft"  # none | ngram | EAGLE | GGUF | ngram+<either>
    reply_store: bool = True  # ngram+<EAGLE draft>: also draft from the draft's reply store
    # ngram+<draft> with tools on: draft a tool call's JSON from the tools' schemas
    # (speculative/skeleton.py) before prompt lookup.
    tool_skeleton: bool = True
    # Jump-forward decoding of tool calls (voicepipe/core/jump.py): a call's fixed text
    # (keys, the rest of a tool's name, closing braces and tag, the end of the turn) fed
    # in one pass instead of decoded. "certain": unverified, only the pass's last row
    # read; "verify": proposed as a draft the target verifies; "off".
    tool_jump: str = "certain"
    spec_k: int = 4
    adaptive_k: bool = True
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    max_new_tokens: int = 160
    # Sessions copy the rendered system prompt's keys and values from a process-wide
    # prefix cache instead of prefilling it (voicepipe/nn/llm/prefix.py).
    prefix_cache: bool = True
    # A prompt is prefilled this many tokens per model pass, the stage yielding between
    # passes (an Interrupt takes effect between them); 0: one pass.
    prefill_chunk: int = 32
    # What the streaming prefill (turns.prefill_ahead) feeds while the user speaks: the
    # words two partials agreed on ("agreed"), or each partial's whole text ("all": a
    # pause on the last partial's words then has its P(end) at once, for the cost of
    # passes over words Whisper may still revise, and of a breath after words that read
    # finished ending the turn; not on the 1.5B on two cores: docs/benchmarks/turns.md).
    prefill_partials: str = "agreed"
    # Threads of a prompt pass on the fused kernel: the prompt is prefilled while speech
    # synthesis waits for the reply, so the second core is free.
    prefill_threads: int = 2
    # Threads of a decode pass on the fused kernel while no other model call runs (the
    # first clause, before the TTS starts); one whenever another call is in flight.
    decode_threads: int = 2
    # One model pass for every session's decode step: the process's batch scheduler
    # (schedulers/llm_batch.py, core/batching.py) instead of each session's own passes.
    batching: bool = False
    # The reply's first spoken chunk (core/text/chunker.py): it may end at a clause mark once
    # it holds first_min_words words, and before a conjunction or relative word once it
    # holds first_break_words (0: only at punctuation), or after a verb phrase before a number
    # or a preposition, so speech starts early.
    first_min_words: int = 3
    first_break_words: int = 4
    # The no-tools sentence keeps the assistant from pretending to act or to know the
    # time, weather or news (bench answers' refusals; docs/BENCHMARKS.md, answers).
    system_prompt: str = (
        "You are a helpful voice assistant. Answer in one to three short spoken sentences. "
        "Answer questions from what you know. You have no tools and no live information: "
        "if asked to do something (set an alarm or timer, call, send a message, play music, "
        "control a device, order or book) or for the current time, weather or news, say "
        "briefly that you can't."
    )

    def __post_init__(self) -> None:
        if self.prefill_partials not in ("agreed", "all"):
            raise ConfigError(
                f"llm.prefill_partials: expected agreed or all, got {self.prefill_partials!r}"
            )
        if self.tool_jump not in ("certain", "verify", "off"):
            raise ConfigError(
                f"llm.tool_jump: expected certain, verify or off, got {self.tool_jump!r}"
            )


# The time-and-date sentence is needed: without it Qwen2.5-Coder-1.5B makes up a time
# rather than call get_current_time. The refusal is bounded to acting outside the
# conversation and live information: told to refuse "anything else", the 1.5B refused
# ordinary requests too ("What should I cook for dinner tonight?" → "I can't help with
# that."). Each sentence here is load-bearing for the tool calls: dropping "then say the
# result briefly" and "You have no other tools" cost 10 of bench answers --tools' 36 on
# the fused AVX2 kernel, and a longer advice sentence 2 of them (0 of 10 ordinary
# requests refused, against 1 of 10 with this wording: "I can't cook for dinner tonight.").
TOOLS_SYSTEM_PROMPT = (
    "You are a helpful voice assistant. Answer in one to three short spoken "
    "sentences. Answer questions and give suggestions from what you know, such as "
    "what to cook, read or do. You do not know the current time or date: call "
    "get_current_time whenever the user asks for the time, the date or the day. Call "
    "set_timer for timers and calculate for arithmetic, then say the result briefly. "
    "You have no other tools and no live information: if asked to act in the world "
    "(call, send a message, play music, control a device, order or book) or for the "
    "weather or news, say briefly that you can't."
)


@dataclass(frozen=True)
class ToolsConfig:
    # Function calling (voicepipe/tools.py, docs/TOOLS.md). On only where the model's chat
    # template renders tools (Qwen2.5's does, SmolLM2's does not: there tools stay off).
    enabled: bool = True
    builtin: list[str] = field(
        default_factory=lambda: ["set_timer", "get_current_time", "calculate"]
    )
    user: list[str] = field(default_factory=list)  # "module:function" names
    # Replaces llm.system_prompt while tools are on (that one says there are none).
    system_prompt: str = TOOLS_SYSTEM_PROMPT
    max_rounds: int = 2  # tool calls answered per reply before the model must speak
    timeout_s: float = 5.0  # one tool call's budget
    # A tool with a spoken result (the built-ins; a user tool's @tool(speak=...)) says it
    # from its template: no second model round. false: the model always says the result.
    speak_results: bool = True
    # A call not answered after this long gets `filler` spoken, so a slow tool is never
    # dead air; the answer follows when it comes (0: never).
    filler_after_ms: float = 700.0
    filler: str = "One moment."
    # A round whose every call names a tool there is not (the model reached for one to
    # act in the world: "send_email", "play_music") is answered with this, no second
    # model round: told "no tool named …", the 1.5B read that aloud. "": the model answers.
    unknown_reply: str = "Sorry, I can't do that from here."
    # A reply whose speech names a tool ("Call getcurrenttime to determine the time…",
    # the 1.5B's recital of its instructions when asked what to do after a mishap) is
    # decoded again without tools if nothing was said yet, else ended with the chunks the
    # TTS has (core/recital.py).
    recital_guard: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.filler_after_ms < float("inf"):
            raise ConfigError(
                f"tools.filler_after_ms: expected 0 (off) or a delay in ms, "
                f"got {self.filler_after_ms!r}"
            )
        if self.filler_after_ms > 0 and not any(c.isalnum() for c in self.filler):
            raise ConfigError(
                f"tools.filler: expected words to say while a tool runs, got {self.filler!r} "
                "(tools.filler_after_ms = 0 turns the filler off)"
            )


@dataclass(frozen=True)
class TtsConfig:
    backend: str = "codec-lm"  # codec-lm | hibari
    # Top-k tolerance (k = 3) on a greedy target: the best speed / round-trip WER trade-off
    # measured (docs/BENCHMARKS.md, text to speech).
    rule: str = "topk"  # greedy | exact | relaxed | topk | acoustic
    beta: float = 0.2  # tolerance of the relaxed and acoustic rules
    top_k: int = 3  # tolerance of the topk rule
    spec_k: int = 4
    adaptive_k: bool = True
    temperature: float = 0.0
    seed: int = 0
    # Speak numbers, dates, symbols, list markers... as words (core/text/norm.py); the
    # pipeline keeps the original text for everything else.
    normalize: bool = True
    # The codec LM's alignment: "teacher" (hibari's own durations, nn/tts/teacher_durations.py:
    # lower round-trip WER on the assistant's replies, docs/BENCHMARKS.md) or "predicted"
    # (the codec LM's own duration predictor, nn/tts/duration.py, which imitates them).
    durations: str = "teacher"
    # Each chunk's audio is sent from this long before its first audible sample: the
    # voice's own leading silence (hibari's pad: 300-375 ms, which the codec LM learnt)
    # is not sent, so the first word is heard that much sooner (core/playout/lead_trim.py).
    # -1: send it all.
    lead_in_ms: int = 40
    # And each chunk's trailing silence (hibari's pad: ~400 ms) is cut to this much after
    # its last audible sample: tail_ms where the chunk ends a sentence, tail_clause_ms where
    # it ends mid-sentence (a first chunk cut at a clause or phrase), so the seam between
    # two chunks is a speaker's pause, not the voice's two pads (core/playout/tail_trim.py).
    # -1: send it all.
    tail_ms: int = 300
    tail_clause_ms: int = 120
    # Every session's codec-LM synthesis on one worker (schedulers/tts_batch.py): LM steps of
    # all speaking sessions batched, vocoder pushes earliest run-dry first; a session's
    # synthesis waits while it is more than batch_ahead_ms ahead of its playout. On by
    # default: at 1 session as fast, at 4-8 sessions faster (docs/BENCHMARKS.md).
    batching: bool = True
    batch_ahead_ms: int = 2000


@dataclass(frozen=True)
class CodecConfig:
    backend: str = "melvq"  # melvq | encodec
    q: int = 4
    model: str = "melvq-hibari"
    # The project's frame-rate iSTFT vocoder (nn/vocoder/istft_vocoder.py), trained on the teacher's
    # voice: ~30x less CPU than HiFi-GAN ("hifigan-universal", still selectable) at 0.3
    # WER points more on held-out sentences (docs/BENCHMARKS.md, the frame-rate vocoder).
    vocoder: str = "vocoder-hibari"
    chunk_frames: int = 8  # token steps per streamed decoder chunk
    encodec_path: str = ""


@dataclass(frozen=True)
class OutputConfig:
    lead_ms: int = 60  # how far ahead of real time the server may send


@dataclass(frozen=True)
class JitterConfig:
    quantile: float = 0.95
    min_delay_ms: int = 20
    max_delay_ms: int = 400
    start_margin_ms: int = 20
    history: int = 200


@dataclass(frozen=True)
class TraceConfig:
    file: str = ""
    # OpenTelemetry: an OTLP/HTTP collector ("http://127.0.0.1:4318", or a full URL ending
    # in /v1/traces) that gets one trace per turn (voicepipe/otel.py); empty: no export.
    otlp_endpoint: str = ""


@dataclass(frozen=True)
class RayConfig:
    # `voicepipe serve --ray` (server/ray_serve.py, docs/DEPLOY.md): the pipeline as Ray Serve
    # replicas behind Serve's proxy on server.host:server.port.
    address: str = ""  # a running cluster ("127.0.0.1:6379", "auto"); empty: start one here
    min_replicas: int = 1
    max_replicas: int = 2
    # The autoscaler's target of open sessions per replica (Serve's target_ongoing_requests:
    # a WebSocket session is one ongoing request for as long as it is open).
    target_sessions_per_replica: int = 4
    upscale_delay_s: float = 5.0  # load above target this long before a replica is added
    downscale_delay_s: float = 30.0  # load below target this long before one leaves
    # A leaving replica (scale-down) takes no new sessions; its own may go on this long,
    # then they finish the reply in flight (server.drain_timeout_s at most) and close 1001.
    leave_timeout_s: float = 300.0
    replica_cpus: float = 1.0  # CPUs Ray reserves per replica (its models' threads)
    # What carries client connections to the replicas. haproxy: Serve's HAProxy ingress,
    # replicas serving their own port behind it (a WebSocket is a plain TCP tunnel once
    # open); proxy: Serve's Python HTTP proxy, which relays every message over Ray (adds
    # latency: docs/BENCHMARKS.md), but closes a dead replica's sessions with 1012.
    ingress: str = "haproxy"
    # HeadOnly: one proxy, on the head (one address for clients); EveryNode: one per node
    # (put a TCP/WebSocket load balancer in front).
    proxy_location: str = "HeadOnly"
    num_cpus: int = 0  # CPUs of the head started here when address is empty; 0: all


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    vad: VadConfig = field(default_factory=VadConfig)
    asr: AsrConfig = field(default_factory=AsrConfig)
    turns: TurnsConfig = field(default_factory=TurnsConfig)
    llm: LlmConfig = field(default_factory=LlmConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    tts: TtsConfig = field(default_factory=TtsConfig)
    codec: CodecConfig = field(default_factory=CodecConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    jitter: JitterConfig = field(default_factory=JitterConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)
    ray: RayConfig = field(default_factory=RayConfig)


DEFAULT_TOML = Path(__file__).resolve().parent.parent / "configs" / "default.toml"


def _coerce(key: str, value: Any, typ: Any) -> Any:
    origin = typing.get_origin(typ)
    if origin is list:
        (item,) = typing.get_args(typ)
        if isinstance(value, str):  # CLI: comma-separated
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return [_coerce(key, v, item) for v in value]
    if origin in (typing.Union, types.UnionType):
        raise ConfigError(f"{key}: unsupported type {typ}")
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if typ is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        try:
            return int(value) if isinstance(value, (int, str)) else _bad(key, value, "an integer")
        except ValueError:
            _bad(key, value, "an integer")
    if typ is float:
        if isinstance(value, bool):
            _bad(key, value, "a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            _bad(key, value, "a number")
    if typ is str:
        if not isinstance(value, str):
            _bad(key, value, "a string")
        return value
    raise ConfigError(f"{key}: unsupported type {typ}")


def _bad(key: str, value: Any, what: str) -> typing.NoReturn:
    raise ConfigError(f"{key}: expected {what}, got {value!r}")


def _section_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _apply(cfg: Config, section: str, key: str, value: Any) -> Config:
    sections = _section_types(Config)
    if section not in sections:
        raise ConfigError(f"unknown config section [{section}] (known: {', '.join(sections)})")
    sec_cls = sections[section]
    keys = _section_types(sec_cls)
    if key not in keys:
        raise ConfigError(f"unknown config key {section}.{key} (known: {', '.join(keys)})")
    new_sec = dataclasses.replace(
        getattr(cfg, section), **{key: _coerce(f"{section}.{key}", value, keys[key])}
    )
    return dataclasses.replace(cfg, **{section: new_sec})


def load(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults, then the TOML file (if any), then ``section.key=value`` overrides."""
    cfg = Config()
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: {e}") from e
        for section, table in data.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{p}: top-level key {section!r} must be a [section]")
            for key, value in table.items():
                cfg = _apply(cfg, section, key, value)
    return apply_overrides(cfg, overrides or [])


def apply_overrides(cfg: Config, overrides: list[str]) -> Config:
    """``cfg`` with ``section.key=value`` items (``--`` prefix optional) applied."""
    for item in overrides:
        name, sep, value = item.removeprefix("--").partition("=")
        section, dot, key = name.partition(".")
        if not sep or not dot:
            raise ConfigError(f"override {item!r}: expected --section.key=value")
        cfg = _apply(cfg, section, key, value)
    return cfg


def split_overrides(argv: list[str]) -> tuple[list[str], list[str]]:
    """Separate ``--section.key=value`` / ``--section.key value`` from other arguments."""
    rest: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if "." in name and not name.startswith("."):
            if "=" in arg:
                overrides.append(arg[2:])
            elif i + 1 < len(argv):
                overrides.append(f"{name}={argv[i + 1]}")
                i += 1
            else:
                raise ConfigError(f"override {arg!r} has no value")
        else:
            rest.append(arg)
        i += 1
    return rest, overrides


def to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    return dataclasses.asdict(cfg)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def dump_toml(cfg: Config) -> str:
    """The whole config as TOML (``load`` of it gives back an equal Config).

    Used to hand a parent process's effective config (file + overrides) to a
    child ``voicepipe serve`` in benchmarks.
    """
    lines: list[str] = []
    for section, values in to_dict(cfg).items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
        lines.append("")
    return "\n".join(lines)
