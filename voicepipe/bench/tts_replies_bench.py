"""`voicepipe bench tts --set replies`: the TTS on what the assistant actually says.

Texts: the stored replies (bench/tts_replies.py) of ``--replies-model`` to
held-out prompts. Each reply is spoken the way the pipeline speaks it: chunk
by chunk as the LLM stage handed them to the TTS, each chunk through the text
front-end (``core.textnorm.normalize``, ``[tts] normalize``); the chunks' audio
is concatenated and the whole reply transcribed by ``--asr-model`` (Whisper
base by default, a stronger judge than the pipeline's tiny.en), in pieces cut
at chunk boundaries of at most ``ASR_WINDOW_S`` (Whisper's 30-s windows
otherwise drop text at their boundaries: an artefact of the judge, not of the
TTS). WER is scored
as `bench textnorm` scores it: reference (the reply as written) and transcript
both through the front-end, then ``core.wer`` ("1969" = "nineteen sixty-nine").

Rows: ``hibari`` (the teacher); ``codec`` ``resynth`` (the teacher's audio encoded
by the codec and decoded: the ceiling of any codec LM over it); codec LM
``<rule>-streamed`` (the configured default, streamed end to end, what a session
runs) and ``ar-streamed`` (plain AR, the vocoder's share); then LM-only rows per
rule and β as `bench tts` does (``ar`` is the speedup baseline). Per row: WER,
``dropout`` (share of reference words lost in runs of >= 5 consecutive words:
phrases or sentences not heard at all; ``core.wer.dropout``), RTF, ttfa (median,
call → first audio of the first chunk), speedup, and the ``worst`` replies by WER
with their transcripts, for error analysis.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

RATE = 22050
# Whisper reads 30-s windows; on a longer reply it can skip the text around a window
# boundary (hibari's own 40-s reply lost 21 % of its words so, and none when cut at
# chunk boundaries), so the judge hears a reply in pieces of at most this many seconds.
ASR_WINDOW_S = 25.0


def _opts(**kw: Any) -> Any:
    """A row's [tts] settings: greedy, β 0, k 3 unless the row says otherwise."""
    from voicepipe.config import TtsConfig

    return TtsConfig(**{"rule": "greedy", "beta": 0.0, **kw})


class _Said:
    """One reply as spoken: audio over all its chunks, time, ttfa, stats."""

    def __init__(self) -> None:
        self.audio: list[np.ndarray] = []
        self.wall_s = self.lm_s = 0.0
        self.ttfa_s: float | None = None
        self.stats: dict[str, float] = {}

    def add(self, audio: np.ndarray, wall_s: float, lm_s: float, ttfa_s: float, st: dict) -> None:
        if self.ttfa_s is None:
            self.ttfa_s = self.wall_s + ttfa_s
        self.audio.append(audio)
        self.wall_s += wall_s
        self.lm_s += lm_s
        for k in ("drafted", "drafts", "accepted", "target_passes"):
            self.stats[k] = self.stats.get(k, 0) + st.get(k, 0)

    @property
    def wave(self) -> np.ndarray:
        return np.concatenate(self.audio) if self.audio else np.zeros(0, np.float32)

    def windows(self, max_s: float = ASR_WINDOW_S) -> list[np.ndarray]:
        """The reply's audio cut at chunk boundaries into pieces of at most ``max_s``
        (a single longer chunk stays whole), for the judge to transcribe one by one."""
        out: list[list[np.ndarray]] = [[]]
        for a in self.audio:
            if out[-1] and (sum(map(len, out[-1])) + len(a)) / RATE > max_s:
                out.append([])
            out[-1].append(a)
        return [np.concatenate(w) for w in out if w]


def _score(
    name: str,
    rule: str,
    beta,
    said: list[_Said],
    replies: list[dict],
    asr: str,
    base_lm: float | None,
    worst: int,
) -> dict:
    from voicepipe.core.text.norm import normalize
    from voicepipe.core.text.wer import dropout, wer
    from voicepipe.roundtrip import transcribe

    hyps = [" ".join(transcribe(w, RATE, model=asr) for w in s.windows()) for s in said]
    refs = [normalize(r["reply"]) for r in replies]
    spoken = [normalize(h) for h in hyps]
    per = [wer(a, b) for a, b in zip(refs, spoken, strict=True)]
    drop = [dropout(a, b) for a, b in zip(refs, spoken, strict=True)]
    words = [len(r.split()) for r in refs]
    audio_s = sum(len(s.wave) for s in said) / RATE
    lm_s = sum(s.lm_s for s in said)
    tot = {
        k: sum(s.stats.get(k, 0) for s in said)
        for k in ("drafted", "drafts", "accepted", "target_passes")
    }
    order = sorted(range(len(said)), key=lambda i: (-per[i], -words[i]))[:worst]
    return {
        "backend": name,
        "rule": rule,
        "beta": beta,
        "wer": wer(refs, spoken),
        "dropout": sum(d * w for d, w in zip(drop, words, strict=True)) / max(sum(words), 1),
        "replies_with_dropout": sum(d > 0 for d in drop),
        "speedup": (base_lm / lm_s) if base_lm and lm_s else None,
        "rtf": sum(s.wall_s for s in said) / audio_s,
        "lm_rtf": lm_s / audio_s if lm_s else None,
        "ttfa_ms": 1e3 * float(np.median([s.ttfa_s or s.wall_s for s in said])),
        "acceptance_rate": tot["accepted"] / tot["drafted"] if tot["drafted"] else None,
        "mean_accepted_len": 1 + tot["accepted"] / tot["drafts"] if tot["drafts"] else None,
        "audio_s": audio_s,
        "n": len(said),
        "worst": [
            {
                "i": i,
                "wer": per[i],
                "dropout": drop[i],
                "words": words[i],
                "audio_s": len(said[i].wave) / RATE,
                "ref": refs[i],
                "hyp": hyps[i],
            }
            for i in order
        ],  # fmt: skip
    }


def _hibari(chunks: list[list[str]]) -> list[_Said]:
    from voicepipe.stages.tts import HibariBackend

    hb = HibariBackend(normalize=True)  # the stage's backend: front-end included
    list(hb.stream("Warm up."))
    out = []
    for reply in chunks:
        s = _Said()
        for c in reply:
            t0 = time.perf_counter()
            parts, ttfa = [], None
            for a in hb.stream(c):
                ttfa = ttfa if ttfa is not None else time.perf_counter() - t0
                parts.append(a)
            wall = time.perf_counter() - t0
            wave = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            s.add(wave, wall, 0.0, ttfa if ttfa is not None else wall, {})
        out.append(s)
    return out


def _resynth(codec: Any, said: list[_Said]) -> list[_Said]:
    """Each chunk of ``said`` encoded by ``codec`` and decoded again."""
    out = []
    for s in said:
        r = _Said()
        for a in s.audio:
            t0 = time.perf_counter()
            wave = codec.decode(codec.encode(a)).numpy() if len(a) else a
            r.add(wave, time.perf_counter() - t0, 0.0, 0.0, {})
        out.append(r)
    return out


def rechunk(text: str, first_min_words: int, first_break_words: int) -> list[str]:
    """``text`` cut into the chunks the LLM stage hands the TTS, fed word by word as the
    model streams it (core/text/chunker.py)."""
    from voicepipe.core.text.chunker import Chunker

    ch = Chunker(first_min_words=first_min_words, first_break_words=first_break_words)
    out: list[str] = []
    for i, w in enumerate(text.split(" ")):
        out += ch.push(w if i == 0 else " " + w)
    last = ch.flush()
    return out + ([last] if last else [])


def served(said: list[_Said], texts: list[list[str]], tts: Any) -> list[_Said]:
    """Each reply's chunks as the TTS stage sends them (stages/tts.py ``trim_edges``)."""
    from voicepipe.stages.tts import trim_edges

    out = []
    for s, chunks in zip(said, texts, strict=True):
        t = _Said()
        t.audio = [trim_edges(a, x, tts, RATE) for a, x in zip(s.audio, chunks, strict=True)]
        t.wall_s, t.lm_s, t.ttfa_s, t.stats = s.wall_s, s.lm_s, s.ttfa_s, s.stats
        out.append(t)
    return out


SEAM_WINDOW_S = 0.02  # RMS frames for the seam's energy
SEAM_QUIET_DB = -40.0  # below the reply's peak: silence at a chunk's edge


def seams(said: list[_Said]) -> dict[str, Any]:
    """At each reply's first seam (the end of its first chunk's audio, the start of the
    second's): the quiet samples either side (``gap``: trailing + leading, below
    SEAM_QUIET_DB re the reply's peak; concatenated chunks never overlap), and the
    energy dip, the quietest 20 ms frame within 100 ms of the seam against the median
    voiced frame of the reply (dB). Medians and p95 over the replies with two chunks."""
    gaps: list[float] = []
    dips: list[float] = []
    each: list[dict[str, Any]] = []
    for i, s in enumerate(said):
        if len(s.audio) < 2:
            continue
        wave = s.wave
        peak = float(np.abs(wave).max()) or 1.0
        quiet = peak * 10 ** (SEAM_QUIET_DB / 20)
        a, b = np.abs(s.audio[0]), np.abs(s.audio[1])
        loud_a, loud_b = np.flatnonzero(a >= quiet), np.flatnonzero(b >= quiet)
        tail = len(a) - 1 - int(loud_a[-1]) if len(loud_a) else len(a)
        head = int(loud_b[0]) if len(loud_b) else len(b)
        gaps.append(float(tail + head))
        n = max(1, round(SEAM_WINDOW_S * RATE))
        frames = len(wave) // n
        rms = np.sqrt((wave[: frames * n].reshape(frames, n).astype(np.float64) ** 2).mean(1))
        voiced = rms[rms >= quiet]
        at = len(s.audio[0]) // n
        near = rms[max(0, at - 5) : at + 5]
        dip = None
        if len(voiced) and len(near):
            dip = 20 * float(np.log10(max(near.min(), 1e-9) / np.median(voiced)))
            dips.append(dip)
        each.append({"reply": i, "gap_samples": gaps[-1], "dip_db": dip})

    def stat(xs: list[float]) -> dict[str, float]:
        if not xs:
            return {}
        return {"p50": round(float(np.percentile(xs, 50)), 1),
                "p95": round(float(np.percentile(xs, 95)), 1)}  # fmt: skip

    return {
        "replies": len(gaps),
        "gap_samples": stat(gaps),
        "gap_ms": stat([g / RATE * 1e3 for g in gaps]),
        "overlap_samples": 0,  # chunks are played one after the other
        "dip_db": stat(dips),
        "rate": RATE,
        "each": each,
    }


def _median(xs: list[int]) -> float:
    return float(np.median(xs)) if xs else 0.0


def run_replies(args: argparse.Namespace) -> dict:
    import json

    import torch

    from voicepipe.bench.common import TTS_BETAS, load_avg
    from voicepipe.bench.tts_replies import load_replies
    from voicepipe.core.text.norm import normalize
    from voicepipe.nn.tts.codec_tts import CodecLMTTS

    torch.set_num_threads(args.threads)
    data = load_replies(args.replies_model)
    replies = data["replies"][: args.sentences or None]
    fbw = getattr(args, "first_break_words", None)
    if fbw is not None:  # as the LLM stage cuts them with that setting
        llm = args.config.llm
        cut = [rechunk(r["reply"], llm.first_min_words, fbw) for r in replies]
        chunks = [[c for c in rc if normalize(c).strip()] for rc in cut]
    else:
        chunks = [[c for c in r["chunks"] if normalize(c).strip()] for r in replies]
    texts = [[normalize(c) for c in rc] for rc in chunks]  # what the codec LM is given
    asr, worst = args.asr_model, 5
    rows: list[dict] = []

    def emit(row: dict) -> None:
        rows.append(row)
        brief = {k: v for k, v in row.items() if k != "worst"}
        print(json.dumps(brief), file=sys.stderr, flush=True)

    models = None
    if args.ckpt:  # a training checkpoint, e.g. one trained with the domain corpus
        from voicepipe.nn.tts.codec_tts import load_training_checkpoints

        models = load_training_checkpoints(args.ckpt, args.duration_ckpt)
    tts = CodecLMTTS.from_config(args.config, args.model or None, models)
    tts.threads, tts.lm_threads = args.threads, args.lm_threads
    tts.durations = args.durations or args.config.tts.durations
    tts.warm_up()
    if not args.no_hibari:
        said = _hibari(chunks)
        emit(_score("hibari", "-", None, said, replies, asr, None, worst))
        # The codec's own ceiling: the teacher's audio through the codec (encode to its
        # levels, decode), judged the same way; no codec LM can sound clearer than this.
        emit(_score("codec", "resynth", None, _resynth(tts.codec, said), replies, asr, None, 0))

    def streamed(opts) -> list[_Said]:
        out = []
        for rt in texts:
            s = _Said()
            for t in rt:
                r = tts.synth(t, opts)
                s.add(r.audio, r.wall_s, r.lm_s, r.ttfa_s, r.stats)
            out.append(s)
        return out

    c = args.config.tts
    if fbw is not None:  # the phrase-break check: the shipped rule only, and the seams
        said = streamed(_opts(rule=c.rule, beta=c.beta, top_k=c.top_k, spec_k=c.spec_k,
                              adaptive_k=c.adaptive_k, temperature=c.temperature,
                              seed=args.seed))  # fmt: skip
        emit(_score("codec-lm", f"{c.rule}-streamed", c.beta, said, replies, asr, None, worst)
             | {"default": True, "first_break_words": fbw, "seams": seams(said)})  # fmt: skip
        # The same audio as the TTS stage sends it (each chunk's edges trimmed: lead_in_ms,
        # tail_ms, tail_clause_ms), judged again: the seams a listener hears, and that the
        # trims cost no words.
        sent = served(said, texts, c)
        emit(_score("codec-lm", f"{c.rule}-served", c.beta, sent, replies, asr, None, worst)
             | {"default": True, "served": True, "seams": seams(sent)})  # fmt: skip
        return {
            "set": "replies", "replies_model": data["model"], "asr_model": asr,
            "replies": len(replies), "chunks": sum(len(t) for t in texts),
            "first_chunk_words": _median([len(t[0].split()) for t in texts if t]),
            "first_chunks": [t[0] if t else "" for t in texts],
            "ref_words": sum(len(normalize(r["reply"]).split()) for r in replies),
            "rows": rows, "first_break_words": fbw, "durations": tts.durations,
            "load_avg": load_avg(),
        }  # fmt: skip
    default = _opts(rule=c.rule, beta=c.beta, top_k=c.top_k, spec_k=c.spec_k,
                    adaptive_k=c.adaptive_k, temperature=c.temperature, seed=args.seed)  # fmt: skip
    s_default = streamed(default)
    s_ar = streamed(_opts(rule="ar", seed=args.seed))
    audio_ar = sum(len(s.wave) for s in s_ar) / RATE
    voc_rtf = sum(s.wall_s - s.lm_s for s in s_ar) / audio_ar

    def lm_only(**kw) -> list[_Said]:
        """LM time per rule; audio decoded once per distinct codes, vocoder time added
        at the streamed run's vocoder RTF (the vocoder's work does not depend on the rule)."""
        out = []
        opts = _opts(spec_k=args.k, seed=args.seed, **kw)
        for rt in texts:
            s = _Said()
            for t in rt:
                codes, st, lm_s = tts.decode_codes(t, opts)
                wave = tts.codec.decode(codes[:, : tts.codec.q]).numpy()
                voc = voc_rtf * len(wave) / RATE
                first_voc = voc_rtf * tts.first_frames * 1024 / RATE
                s.add(wave, lm_s + voc, lm_s, st.get("first_s", lm_s) + first_voc, st)
            out.append(s)
        return out

    base = lm_only(rule="ar", temperature=0.0)
    base_lm = sum(s.lm_s for s in base)
    emit(_score("codec-lm", f"{c.rule}-streamed", c.beta, s_default, replies, asr, base_lm, worst)
         | {"default": True, "top_k": c.top_k})  # fmt: skip
    emit(_score("codec-lm", "ar-streamed", None, s_ar, replies, asr, base_lm, worst)
         | {"vocoder_rtf": voc_rtf})  # fmt: skip
    emit(_score("codec-lm", "ar", None, base, replies, asr, base_lm, worst))
    betas = (0.0, 0.3) if args.quick else TTS_BETAS
    for rule in args.rules.split(","):
        if rule == "relaxed":  # sampled rows: the held-out bench covers them
            continue
        for beta in [0.0] if rule == "greedy" else betas:
            kw = {"rule": rule, "beta": beta, "temperature": 0.0}
            if rule == "topk":
                kw["top_k"] = 1 + round(10 * beta)
            emit(_score("codec-lm", rule, beta, lm_only(**kw), replies, asr, base_lm, worst)
                 | ({"top_k": kw["top_k"]} if "top_k" in kw else {}))  # fmt: skip
    return {
        "set": "replies",
        "replies_model": data["model"],
        "asr_model": asr,
        "replies": len(replies),
        "chunks": sum(len(t) for t in texts),
        "ref_words": sum(len(normalize(r["reply"]).split()) for r in replies),
        "rows": rows,
        "threads": args.threads,
        "lm_threads": args.lm_threads,
        "spec_k": args.k,
        "vocoder_rtf": voc_rtf,
        "durations": tts.durations,
        "load_avg": load_avg(),
    }
