// Reply playback: the adaptive playout buffer (jitter.js, the same algorithm as
// voicepipe/core/playout/jitter.py) pulled by the audio clock, one render quantum at a time.
// Times given to the buffer are this context's clock in ns (currentFrame / sampleRate).
import { JitterBuffer } from './jitter.js';

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const params = (options.processorOptions && options.processorOptions.params) || {};
    this.jb = new JitterBuffer({ ...params, sample_rate: sampleRate });
    this.played = 0; // samples of reply audio handed to the speaker
    this.nonSilent = 0;
    this.lastReport = 0;
    this.port.onmessage = (e) => this.onMessage(e.data);
  }

  nowNs() { return Math.round(currentFrame * 1e9 / sampleRate); }

  onMessage(m) {
    if (m.type === 'audio') {
      this.jb.push(m.seq, m.media, m.pcm, this.nowNs(), m.turn, m.last);
    } else if (m.type === 'end') {
      this.jb.endReply(m.turn);
    } else if (m.type === 'clear') {
      this.jb.clear(m.upto === undefined ? null : m.upto);
      this.report(true);
    }
  }

  report(force) {
    if (!force && currentFrame - this.lastReport < sampleRate / 10) return;
    this.lastReport = currentFrame;
    const pl = this.jb.playoutDict();
    this.port.postMessage({ type: 'stats', stats: this.jb.stats(this.nowNs()), playouts: pl,
      played: this.played, nonSilent: this.nonSilent, ctxNs: this.nowNs() });
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    const pcm = this.jb.pull(out.length, this.nowNs());
    let loud = 0;
    for (let i = 0; i < out.length; i++) {
      out[i] = pcm[i] / 32768;
      if (pcm[i] !== 0) loud++;
    }
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    if (this.jb.cur !== null || loud) this.played += out.length;
    this.nonSilent += loud;
    this.report(false);
    return true;
  }
}

registerProcessor('voicepipe-playback', PlaybackProcessor);
