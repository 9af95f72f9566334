// Microphone capture: render quanta of float samples → PCM16 frames of `frameMs`
// at the AudioContext's own rate (the server resamples to its ASR rate). Each frame
// carries the index of its first sample on the capture timeline, and the context
// frame at which that sample was captured so the page can map media time to clock time.
class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const frameMs = (options.processorOptions && options.processorOptions.frameMs) || 20;
    this.size = Math.round(sampleRate * frameMs / 1000);
    this.buf = new Int16Array(this.size);
    this.fill = 0;
    this.media = 0; // samples captured so far
    this.frameStartCtx = 0;
    this.running = true;
    this.port.onmessage = (e) => { if (e.data && e.data.type === 'stop') this.running = false; };
  }

  process(inputs) {
    if (!this.running) return false;
    const input = inputs[0];
    const ch = input && input[0];
    if (!ch) return true; // no input connected yet
    for (let i = 0; i < ch.length; i++) {
      if (this.fill === 0) this.frameStartCtx = currentFrame + i;
      const v = Math.max(-1, Math.min(1, ch[i]));
      this.buf[this.fill++] = v < 0 ? Math.round(v * 32768) : Math.round(v * 32767);
      if (this.fill === this.size) {
        const pcm = this.buf;
        this.port.postMessage({ type: 'frame', pcm, media: this.media,
          ctxFrame: this.frameStartCtx }, [pcm.buffer]);
        this.media += this.size;
        this.buf = new Int16Array(this.size);
        this.fill = 0;
      }
    }
    return true;
  }
}

registerProcessor('voicepipe-capture', CaptureProcessor);
