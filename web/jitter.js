// Adaptive playout buffer: a line-by-line port of voicepipe/core/playout/jitter.py and
// voicepipe/core/playout/tsm.py (read those for the why). Runs in the playback AudioWorklet
// and under `node --test`; tests/data/jitter_vectors.json keeps both bit-identical,
// so change the two together and regenerate the vectors
// (tests/data/make_jitter_vectors.py).

export const DEFAULTS = {
  frame_ms: 20, quantile: 0.95, min_delay_ms: 20, max_delay_ms: 400, start_margin_ms: 20,
  history: 200, accel_above_ms: 20, stretch_below_ms: 0, peak_above_ms: 60,
  peak_period_ms: 10000, peak_merge_ms: 1000, fade_ms: 40, xfade_ms: 5,
  pitch_min_ms: 2.5, pitch_max_ms: 15.0, window_ms: 10.0, min_corr: 0.5, silence_rms: 64,
  stretch_hold: 2, accel_hold: 1, learn_frames: 50,
};

export function msToSamples(ms, sr) { return Math.floor(ms * sr / 1000.0); }

function round16(x) {
  const v = Math.floor(x + 0.5);
  return v < -32768 ? -32768 : v > 32767 ? 32767 : v;
}

// (T, normalised correlation) of the lag T in [lo, hi] best matching x[0:w].
export function bestLag(x, lo, hi, w, silenceEnergy) {
  let e0 = 0;
  for (let i = 0; i < w; i++) e0 += x[i] * x[i];
  if (e0 < silenceEnergy) return [hi, 1.0];
  const sq = new Float64Array(hi + w + 1);
  for (let i = 0; i < hi + w; i++) sq[i + 1] = sq[i] + x[i] * x[i];
  let bestT = lo, best = -Infinity;
  for (let t = lo; t <= hi; t++) {
    let c = 0;
    for (let i = 0; i < w; i++) c += x[i] * x[t + i];
    const et = sq[t + w] - sq[t];
    const norm = et > 0 ? c / Math.sqrt(e0 * et) : 0.0;
    if (norm > best) { best = norm; bestT = t; }
  }
  return [bestT, best];
}

export function crossfade(a, b) {
  const n = a.length, out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const w = (i + 1) / (n + 1);
    out[i] = round16(a[i] * (1.0 - w) + b[i] * w);
  }
  return out;
}

export function accelerate(x, t) { return crossfade(x.subarray(0, t), x.subarray(t, 2 * t)); }

export function stretch(x, t) {
  const out = new Int16Array(2 * t);
  out.set(x.subarray(0, t), 0);
  out.set(crossfade(x.subarray(t, 2 * t), x.subarray(0, t)), t);
  return out;
}

export function conceal(hist, period, k0, n, fade) {
  const out = new Int16Array(n);
  if (period <= 0 || hist.length === 0 || k0 >= fade) return out;
  for (let j = 0; j < n; j++) {
    const k = k0 + j;
    const base = hist[hist.length - period + (k % period)];
    const gain = Math.max(0.0, 1.0 - k / fade);
    out[j] = round16(base * gain);
  }
  return out;
}

export function periodOf(hist, lo, hi, w, silenceEnergy) {
  if (hist.length < hi + w) return Math.min(hist.length, hi);
  const rev = new Int16Array(hist.length);
  for (let i = 0; i < hist.length; i++) rev[i] = hist[hist.length - 1 - i];
  return bestLag(rev, lo, hi, w, silenceEnergy)[0];
}

function concat(parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Int16Array(n);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

export class JitterBuffer {
  constructor(params, recordOps = false) {
    const p = this.p = { ...DEFAULTS, ...params };
    const sr = p.sample_rate;
    this.frame = msToSamples(p.frame_ms, sr);
    this.pmin = msToSamples(p.pitch_min_ms, sr);
    this.pmax = msToSamples(p.pitch_max_ms, sr);
    this.win = msToSamples(p.window_ms, sr);
    this.silence = this.win * p.silence_rms * p.silence_rms;
    this.fade = msToSamples(p.fade_ms, sr);
    this.xfade = Math.max(1, msToSamples(p.xfade_ms, sr));
    this.replies = new Map();
    this.playouts = new Map();
    this.cur = null;
    this.finishedUpto = -1;
    this.originNs = null;
    this.maxSeq = null;
    this.offsets = [];
    this.rel = [];
    this.peaks = [];
    this.delay = 0;
    this.block = 0;
    this.pending = new Int16Array(0);
    this.lastPullNs = 0;
    this.lastPullN = 0;
    this.hist = new Int16Array(0);
    this.hold = 0;
    this.concealing = false;
    this.concPeriod = 0;
    this.concK = 0;
    this.histLen = this.pmax + this.win;
    this.c = { underruns: 0, concealed: 0, accelerated: 0, stretched: 0, played: 0, lost: 0,
      late: 0, duplicates: 0 };
    this.ops = recordOps ? [] : null;
  }

  push(seq, mediaTs, pcm, nowNs, reply = 0, last = false) {
    if (this.originNs === null) this.originNs = nowNs;
    if (reply <= this.finishedUpto) { this.c.late++; return; }
    let r = this.replies.get(reply);
    if (r === undefined) {
      r = newReply(nowNs);
      this.replies.set(reply, r);
    }
    if (last) r.ended = true;
    if (r.packets.has(seq)) { this.c.duplicates++; return; }
    if (r.started && seq < r.nextSeq) { this.c.late++; return; }
    if (pcm.length) r.packets.set(seq, [mediaTs, pcm]);
    if (this.maxSeq === null || seq > this.maxSeq) {
      this.maxSeq = seq;
      this._observe(mediaTs, nowNs, reply, r);
    }
  }

  _observe(media, nowNs, reply, r) {
    const sr = this.p.sample_rate;
    const arr = Math.floor((nowNs - this.originNs) * sr / 1e9);
    this.offsets.push(arr - media);
    if (this.offsets.length > this.p.history) this.offsets.shift();
    let mn = Infinity;
    for (const o of this.offsets) if (o < mn) mn = o;
    const rel = arr - media - mn;
    this.rel.push(rel);
    if (this.rel.length > this.p.history) this.rel.shift();
    const base = this._baseTarget();
    if (rel > base + msToSamples(this.p.peak_above_ms, sr)) {
      const lastPeak = this.peaks[this.peaks.length - 1];
      if (lastPeak && nowNs - lastPeak[0] < this.p.peak_merge_ms * 1000000) {
        lastPeak[1] = Math.max(lastPeak[1], rel);
      } else {
        if (lastPeak && nowNs - lastPeak[0] > this.p.peak_period_ms * 1000000) this.peaks = [];
        this.peaks.push([nowNs, rel]);
        if (this.peaks.length > 8) this.peaks = this.peaks.slice(-8);
      }
    }
    if (reply === this.cur && r.started) {
      const el = Math.floor((nowNs - this.lastPullNs) * sr / 1e9);
      const ahead = this.pending.length + Math.max(0, this.lastPullN - el) + (media - r.playMedia);
      this.delay = ahead + rel;
    }
  }

  endReply(reply) {
    if (reply > this.finishedUpto) {
      if (!this.replies.has(reply)) this.replies.set(reply, newReply(0));
      this.replies.get(reply).ended = true;
    }
  }

  clear(uptoReply = null) {
    for (const t of [...this.replies.keys()].sort((a, b) => a - b)) {
      if (uptoReply === null || t <= uptoReply) this._finish(t);
    }
    this.pending = new Int16Array(0);
    this.concealing = false;
  }

  _baseTarget() {
    if (this.rel.length === 0) return this.block;
    const s = [...this.rel].sort((a, b) => a - b);
    const k = Math.max(0, Math.ceil(this.p.quantile * s.length) - 1);
    return s[k] + this.block;
  }

  target(nowNs = null) {
    const sr = this.p.sample_rate;
    let t = this._baseTarget();
    if (this.peaks.length >= 2 && (nowNs === null ||
        nowNs - this.peaks[this.peaks.length - 1][0] <= 2 * this.p.peak_period_ms * 1000000)) {
      let h = -Infinity;
      for (const pk of this.peaks) if (pk[1] > h) h = pk[1];
      t = Math.max(t, h + this.block);
    }
    const lo = msToSamples(this.p.min_delay_ms, sr);
    return Math.min(Math.max(t, lo), msToSamples(this.p.max_delay_ms, sr));
  }

  pull(n, nowNs) {
    this.block = Math.max(this.block, n);
    const parts = [this.pending];
    let have = this.pending.length;
    while (have < n) {
      const seg = this._step(n - have, nowNs, have);
      parts.push(seg);
      have += seg.length;
    }
    const out = concat(parts);
    this.pending = out.slice(n);
    this.lastPullNs = nowNs;
    this.lastPullN = n;
    return out.subarray(0, n);
  }

  _op(code, k) {
    if (this.ops === null) return;
    const lastOp = this.ops[this.ops.length - 1];
    if (lastOp && lastOp[0] === code && 'NZC'.includes(code)) {
      this.ops[this.ops.length - 1] = code + (parseInt(lastOp.slice(1), 10) + k);
    } else {
      this.ops.push(code + k);
    }
  }

  _step(need, nowNs, offset) {
    if (this.cur === null && !this._start(nowNs)) {
      this._op('Z', need);
      return new Int16Array(need);
    }
    const r = this.replies.get(this.cur);
    const avail = this._avail(r);
    if (avail === 0) {
      const later = [...r.packets.keys()].filter((s) => s > r.nextSeq);
      if (later.length === 0 && r.ended) {
        this._finish(this.cur);
        this.concealing = false;
        return new Int16Array(0);
      }
      const tgt = this.target(nowNs);
      let laterSamples = 0;
      for (const s of later) laterSamples += r.packets.get(s)[1].length;
      if (later.length && (laterSamples >= tgt || r.gapWait >= tgt)) {
        const nxt = Math.min(...later);
        this.c.lost += nxt - r.nextSeq;
        this._op('L', nxt - r.nextSeq);
        this.delay -= r.packets.get(nxt)[0] - r.playMedia;
        r.nextSeq = nxt; r.idx = 0; r.playMedia = r.packets.get(nxt)[0]; r.gapWait = 0;
        return new Int16Array(0);
      }
      if (!this.concealing) {
        this.concealing = true;
        this.c.underruns++;
        this.concK = 0;
        this.concPeriod = periodOf(this.hist, this.pmin, this.pmax, this.win, this.silence);
      }
      const seg = conceal(this.hist, this.concPeriod, this.concK, need, this.fade);
      this.concK += need;
      this.c.concealed += need;
      this.delay += need;
      if (later.length) r.gapWait += need;
      this._op('C', need);
      return seg;
    }
    if (this.concealing) {
      const m = Math.min(avail, this.xfade);
      const conc = conceal(this.hist, this.concPeriod, this.concK, m, this.fade);
      const seg = crossfade(conc, this._take(r, m));
      this.concealing = false;
      return this._emit(seg, nowNs, offset, 'F', m);
    }
    const tgt = this.target(nowNs);
    const needTsm = Math.max(2 * this.pmax, this.pmax + this.win);
    if (this.hold <= 0 && avail >= needTsm) {
      const sr = this.p.sample_rate;
      if (this.rel.length >= this.p.learn_frames &&
          this.delay > tgt + msToSamples(this.p.accel_above_ms, sr)) {
        const [t, corr] = bestLag(this._peek(r, needTsm), this.pmin, this.pmax, this.win,
          this.silence);
        if (corr >= this.p.min_corr && avail >= 2 * t) {
          const seg = accelerate(this._take(r, 2 * t), t);
          this.delay -= t;
          this.c.accelerated += t;
          this.hold = this.p.accel_hold * t;
          return this._emit(seg, nowNs, offset, 'A', t);
        }
      } else if (this.delay < tgt - msToSamples(this.p.stretch_below_ms, sr)) {
        const x = this._peek(r, needTsm);
        const [t, corr] = bestLag(x, this.pmin, this.pmax, this.win, this.silence);
        if (corr >= this.p.min_corr) {
          const seg = stretch(x, t);
          this._take(r, t);
          this.delay += t;
          this.c.stretched += t;
          this.hold = this.p.stretch_hold * t;
          return this._emit(seg, nowNs, offset, 'S', t);
        }
      }
    }
    const k = Math.min(avail, need);
    this.hold -= k;
    return this._emit(this._take(r, k), nowNs, offset, 'N', k);
  }

  _emit(seg, nowNs, offset, code, k) {
    const pl = this.playouts.get(this.cur);
    if (pl.first_play_ns === null) {
      pl.first_play_ns = nowNs + Math.floor(offset * 1e9 / this.p.sample_rate);
    }
    const h = concat([this.hist, seg]);
    this.hist = h.slice(Math.max(0, h.length - this.histLen));
    this._op(code, k);
    return seg;
  }

  _start(nowNs) {
    const waiting = [...this.replies.keys()].filter((t) => t > this.finishedUpto)
      .sort((a, b) => a - b);
    if (waiting.length === 0) return false;
    const t = waiting[0];
    const r = this.replies.get(t);
    if (r.packets.size === 0) {
      if (r.ended) this._finish(t);
      return false;
    }
    const first = Math.min(...r.packets.keys());
    r.nextSeq = first; r.idx = 0; r.playMedia = r.packets.get(first)[0];
    const avail = this._avail(r);
    const start = this.frame + msToSamples(this.p.start_margin_ms, this.p.sample_rate);
    const waited = nowNs - r.firstArrivalNs >= (this.p.frame_ms + this.p.start_margin_ms) * 1e6;
    if (!(avail >= start || r.ended || waited)) return false;
    r.started = true;
    this.cur = t;
    this.playouts.set(t, { first_play_ns: null, played_samples: 0, done: false });
    this.delay = avail + this.pending.length;
    this.hist = new Int16Array(0);
    this.hold = 0;
    this._op('P', t);
    return true;
  }

  _finish(t) {
    this.replies.delete(t);
    this.finishedUpto = Math.max(this.finishedUpto, t);
    if (this.playouts.has(t)) this.playouts.get(t).done = true;
    if (this.cur === t) this.cur = null;
  }

  _avail(r) {
    let n = 0, s = r.nextSeq, idx = r.idx;
    while (r.packets.has(s)) {
      n += r.packets.get(s)[1].length - idx;
      s += 1; idx = 0;
    }
    return n;
  }

  _peek(r, k) {
    const parts = [];
    let s = r.nextSeq, idx = r.idx, n = 0;
    while (n < k && r.packets.has(s)) {
      const pcm = r.packets.get(s)[1];
      const part = pcm.subarray(idx, Math.min(pcm.length, idx + k - n));
      parts.push(part);
      n += part.length;
      s += 1; idx = 0;
    }
    return concat(parts);
  }

  _take(r, k) {
    const out = this._peek(r, k);
    let left = out.length;
    while (left > 0) {
      const pcm = r.packets.get(r.nextSeq)[1];
      const use = Math.min(left, pcm.length - r.idx);
      r.idx += use;
      left -= use;
      if (r.idx >= pcm.length) {
        r.packets.delete(r.nextSeq);
        r.nextSeq += 1; r.idx = 0;
      }
    }
    r.playMedia += out.length;
    r.gapWait = 0;
    this.c.played += out.length;
    this.playouts.get(this.cur).played_samples += out.length;
    return out;
  }

  stats(nowNs = null) {
    const sr = this.p.sample_rate, c = this.c;
    const ms = (k) => k * 1000 / sr;
    return {
      underruns: c.underruns,
      concealed_ms: ms(c.concealed),
      accelerated_ms: ms(c.accelerated),
      stretched_ms: ms(c.stretched),
      played_ms: ms(c.played),
      current_delay_ms: ms(this.delay),
      target_delay_ms: ms(this.target(nowNs)),
      lost_frames: c.lost,
      late_frames: c.late,
      duplicate_frames: c.duplicates,
    };
  }

  playoutDict() {
    const out = {};
    for (const [t, p] of this.playouts) out[String(t)] = { ...p };
    return out;
  }
}

function newReply(firstArrivalNs) {
  return { packets: new Map(), ended: false, firstArrivalNs, started: false, nextSeq: 0,
    idx: 0, playMedia: 0, gapWait: 0 };
}
