// voicepipe browser page: mic → WebSocket → server pipeline → playout worklet → speaker.
// Wire protocol: docs/PROTOCOL.md (binary audio frames with a 20-byte header, JSON text
// messages). One AudioContext at the device rate does both capture and playback; the
// hello asks the server to send replies at that same rate, so nothing resamples here.

const $ = (id) => document.getElementById(id);
const HEADER = 20;
const FLAG_LAST = 1;

// Everything the page knows, also read by the browser test (tests/browser/).
const state = window.voicepipe = {
  status: 'idle', sessionId: null, sentFrames: 0, sentSamples: 0, receivedFrames: 0,
  receivedSamples: 0, receivedPeak: 0, played: 0, nonSilent: 0, stats: {}, playouts: {},
  transcripts: [], replies: {}, spans: {}, errors: [], alerts: [], closed: null,
};

let ws = null, ctx = null, capture = null, playback = null, stream = null;
let sendSeq = 0, captureStartCtxFrame = null, currentReply = null;
let reported = {}; // turn → "started" | "done"
let reportedPlayed = {}; // turn → played_samples last reported
// A session lost before it was done (server or replica gone: docs/PROTOCOL.md) starts
// again on a new connection, a few times; a hang-up never does.
const RECONNECT_CODES = [1001, 1006, 1012];
const MAX_RECONNECTS = 3;
let reconnects = 0, hungUp = false;
state.reconnects = []; // {sessionId, code, reason} of each lost session

function setStatus(s) { state.status = s; $('status').textContent = s; }

function encodeAudio(seq, media, pcm) {
  const buf = new ArrayBuffer(HEADER + pcm.length * 2);
  const dv = new DataView(buf);
  dv.setUint8(0, 1); dv.setUint8(1, 1); dv.setUint16(2, 0, true);
  dv.setUint32(4, seq >>> 0, true); dv.setUint32(8, 0, true);
  dv.setBigUint64(12, BigInt(media), true);
  for (let i = 0; i < pcm.length; i++) dv.setInt16(HEADER + 2 * i, pcm[i], true);
  return buf;
}

function decodeAudio(buf) {
  const dv = new DataView(buf);
  if (buf.byteLength < HEADER || dv.getUint8(0) !== 1 || dv.getUint8(1) !== 2) {
    throw new Error('bad audio frame');
  }
  const n = (buf.byteLength - HEADER) >> 1;
  const pcm = new Int16Array(n);
  for (let i = 0; i < n; i++) pcm[i] = dv.getInt16(HEADER + 2 * i, true);
  return { flags: dv.getUint16(2, true), seq: dv.getUint32(4, true),
    turn: dv.getUint32(8, true), media: Number(dv.getBigUint64(12, true)), pcm };
}

function send(obj) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj)); }

async function start() {
  $('start').disabled = true;
  hungUp = false;
  sendSeq = 0; captureStartCtxFrame = null; currentReply = null; reported = {};
  reportedPlayed = {};
  setStatus('asking for the microphone…');
  try {
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true,
        channelCount: 1 } });
  } catch (e) {
    fail(`no microphone: ${e.message}`);
    return;
  }
  ctx = new AudioContext({ latencyHint: 'interactive' });
  await ctx.audioWorklet.addModule('capture-worklet.js');
  await ctx.audioWorklet.addModule('playback-worklet.js');
  const proto = location.protocol === 'https:' ? 'wss' : 'ws';
  ws = new WebSocket(`${proto}://${location.host}/ws`);
  ws.binaryType = 'arraybuffer';
  setStatus('connecting…');
  ws.onopen = () => send({ type: 'hello', version: 1, sample_rate: ctx.sampleRate,
    format: 'pcm16', output_sample_rate: ctx.sampleRate, token: tokenFromUrl(),
    client: `browser ${navigator.userAgent.slice(0, 80)}` });
  ws.onmessage = (e) => onMessage(e.data);
  ws.onclose = (e) => {
    state.closed = { code: e.code, reason: e.reason };
    const why = `closed ${e.code}${e.reason ? ': ' + e.reason : ''}`;
    teardown();
    const lost = state.sessionId !== null && RECONNECT_CODES.includes(e.code);
    if (lost && !hungUp && reconnects < MAX_RECONNECTS) {
      reconnects++;
      state.reconnects.push({ sessionId: state.sessionId, code: e.code, reason: e.reason });
      state.sessionId = null;
      if (ctx) ctx.close();
      ctx = null; playback = null;
      setStatus(`${why}: reconnecting…`);
      setTimeout(start, 500 * reconnects);
      return;
    }
    setStatus(why);
  };
  ws.onerror = () => setStatus('connection error');
}

function tokenFromUrl() { return new URLSearchParams(location.search).get('token') || ''; }

function onHelloAck(m) {
  state.sessionId = m.session_id;
  reconnects = 0;
  if (m.output_sample_rate !== ctx.sampleRate) {
    fail(`server sends ${m.output_sample_rate} Hz, this page plays ${ctx.sampleRate} Hz`);
    return;
  }
  playback = new AudioWorkletNode(ctx, 'voicepipe-playback', { numberOfInputs: 0,
    outputChannelCount: [1], processorOptions: { params: { frame_ms: m.frame_ms } } });
  playback.port.onmessage = (e) => onPlaybackStats(e.data);
  playback.connect(ctx.destination);
  const src = ctx.createMediaStreamSource(stream);
  capture = new AudioWorkletNode(ctx, 'voicepipe-capture', { numberOfOutputs: 0,
    processorOptions: { frameMs: 20 } });
  capture.port.onmessage = (e) => onCaptureFrame(e.data);
  src.connect(capture);
  ctx.resume();
  setStatus(`listening (session ${m.session_id}, ${m.pipeline})`);
  $('stop').disabled = false;
  $('hangup').disabled = false;
}

function onCaptureFrame(f) {
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  if (captureStartCtxFrame === null) captureStartCtxFrame = f.ctxFrame - f.media;
  ws.send(encodeAudio(sendSeq++, f.media, f.pcm));
  state.sentFrames++;
  state.sentSamples += f.pcm.length;
  let peak = 0;
  for (let i = 0; i < f.pcm.length; i++) peak = Math.max(peak, Math.abs(f.pcm[i]));
  $('level').firstElementChild.style.width = `${Math.min(100, peak / 100)}%`;
}

function onMessage(data) {
  if (typeof data !== 'string') {
    const a = decodeAudio(data);
    state.receivedFrames++;
    state.receivedSamples += a.pcm.length;
    for (let i = 0; i < a.pcm.length; i++) {
      state.receivedPeak = Math.max(state.receivedPeak, Math.abs(a.pcm[i]));
    }
    currentReply = a.turn;
    playback.port.postMessage({ type: 'audio', seq: a.seq, media: a.media, pcm: a.pcm,
      turn: a.turn, last: (a.flags & FLAG_LAST) !== 0 }, [a.pcm.buffer]);
    return;
  }
  const m = JSON.parse(data);
  switch (m.type) {
    case 'hello_ack': onHelloAck(m); break;
    case 'transcript': onTranscript(m); break;
    case 'reply_start': currentReply = m.turn_id; reply(m.turn_id); break;
    case 'reply_text': reply(m.turn_id).text += m.delta; renderReplies(); break;
    case 'reply_end': {
      const r = reply(m.turn_id);
      r.text = m.text || r.text; r.interrupted = m.interrupted; r.done = true;
      playback.port.postMessage({ type: 'end', turn: m.turn_id });
      renderReplies();
      break;
    }
    case 'interrupt': // barge-in: the user spoke over the reply
      playback.port.postMessage({ type: 'clear', upto: m.turn_id - 1 });
      break;
    case 'span': addSpan(m.turn_id, m.name, m.start_ms, m.duration_ms); break;
    case 'metrics': break;
    case 'error': state.errors.push(m); setStatus(`error ${m.code}: ${m.message}`); break;
    case 'alert': onAlert(m); break;
    case 'done': setStatus('done'); break;
    default: break;
  }
}

function onTranscript(m) {
  const list = state.transcripts;
  const last = list[list.length - 1];
  if (last && !last.final && last.turn === m.turn_id) list.pop();
  list.push({ turn: m.turn_id, text: m.text, final: m.final, speechEndMs: m.speech_end_ms });
  const box = $('transcript');
  box.replaceChildren(...list.slice(-12).map((t) => {
    const d = document.createElement('div');
    d.className = `turn you${t.final ? '' : ' partial'}`;
    d.textContent = t.text;
    return d;
  }));
}

// A timer the assistant set has ended: shown here; its words follow as a reply of their
// own turn (reply_start … reply_end), so the playout speaks them like any reply.
function onAlert(m) {
  state.alerts.push(m);
  const r = reply(m.turn_id);
  r.alert = true;
  r.text = r.text || m.text;
  renderReplies();
  const d = document.createElement('div');
  d.textContent = `${new Date().toLocaleTimeString()}: ${m.text}`;
  $('alerts').replaceChildren(d);
  setTimeout(() => { if (d.isConnected) d.remove(); }, 30000);
}

function reply(turn) {
  if (!state.replies[turn]) state.replies[turn] = { text: '', done: false, interrupted: false };
  return state.replies[turn];
}

function renderReplies() {
  $('reply').replaceChildren(...Object.entries(state.replies).slice(-8).map(([, r]) => {
    const d = document.createElement('div');
    d.className = `turn bot${r.interrupted ? ' cut' : ''}${r.alert ? ' alert' : ''}`;
    d.textContent = r.text || '…';
    return d;
  }));
}

function addSpan(turn, name, startMs, durMs) {
  (state.spans[turn] = state.spans[turn] || {})[name] = { start: startMs, dur: durMs };
  renderWaterfall();
}

// First reply sample played (context clock) minus when the user's last speech sample
// was captured (capture timeline → context clock): voice to voice, as heard.
function e2eMs(turn) {
  const pl = state.playouts[turn];
  const fin = state.transcripts.find((t) => t.turn === turn && t.final && t.speechEndMs != null);
  if (!pl || pl.first_play_ns == null || !fin || captureStartCtxFrame === null) return null;
  const spokeNs = (captureStartCtxFrame / ctx.sampleRate + fin.speechEndMs / 1000) * 1e9;
  return (pl.first_play_ns - spokeNs) / 1e6;
}

function renderWaterfall() {
  const turns = Object.keys(state.spans).map(Number).sort((a, b) => a - b).slice(-4);
  $('waterfall').replaceChildren(...turns.map((turn) => {
    const spans = { ...state.spans[turn] };
    const rows = Object.entries(spans).map(([name, s]) => [name, s.start, s.dur]);
    const t0 = Math.min(...rows.map((r) => r[1]));
    const e2e = e2eMs(turn);
    const end = Math.max(...rows.map((r) => r[1] + r[2]), e2e === null ? 0 : t0 + e2e, t0 + 100);
    const wrap = document.createElement('div');
    wrap.className = 'wf';
    wrap.innerHTML = `<div>turn ${turn}</div>`;
    const all = rows.sort((a, b) => a[1] - b[1]);
    if (e2e !== null) all.push(['e2e.voice_to_voice (here)', null, e2e]);
    for (const [name, start, dur] of all) {
      const row = document.createElement('div');
      row.className = 'wf-row';
      const left = start === null ? 0 : (start - t0) / (end - t0) * 100;
      const width = Math.max(0.5, dur / (end - t0) * 100);
      row.innerHTML = `<span></span><div class="wf-track"><div class="wf-bar${start === null ?
        ' e2e' : ''}" style="left:${left}%;width:${width}%"></div></div><span class="wf-ms">` +
        `${dur.toFixed(0)}</span>`;
      row.firstChild.textContent = name;
      wrap.appendChild(row);
    }
    return wrap;
  }));
}

function onPlaybackStats(m) {
  state.stats = m.stats; state.playouts = m.playouts; state.played = m.played;
  state.nonSilent = m.nonSilent;
  const rows = Object.entries(m.stats).map(([k, v]) =>
    `<tr><td>${k}</td><td>${Number.isInteger(v) ? v : v.toFixed(1)}</td></tr>`);
  rows.push(`<tr><td>samples_played</td><td>${m.played}</td></tr>`);
  $('jitter').innerHTML = rows.join('');
  // tell the server what was heard, when (docs/PROTOCOL.md "playback")
  for (const [turn, pl] of Object.entries(m.playouts)) {
    const phase = pl.done ? 'done' : pl.first_play_ns !== null ? 'started' : null;
    // Also on every stats message (~100 ms) while it plays: the server's echo canceller
    // lines its reference up with where the playout really is.
    const moving = phase === 'started' && pl.played_samples > (reportedPlayed[turn] || 0);
    if (phase && (reported[turn] !== phase || moving)) {
      reported[turn] = phase;
      reportedPlayed[turn] = pl.played_samples;
      send({ type: 'playback', turn_id: Number(turn), played_samples: pl.played_samples,
        sample_rate: ctx.sampleRate, first_play_ms: pl.first_play_ns / 1e6,
        now_ms: m.ctxNs / 1e6, done: pl.done, counters: m.stats });
    }
  }
  renderWaterfall();
}

function stopReply() {
  if (currentReply === null) return;
  send({ type: 'interrupt', turn_id: currentReply, reason: 'stop button' });
  playback.port.postMessage({ type: 'clear', upto: currentReply });
}

function hangup() {
  hungUp = true;
  send({ type: 'end' });
  setStatus('finishing…');
}

function teardown() {
  if (capture) { capture.port.postMessage({ type: 'stop' }); capture.disconnect(); }
  if (stream) for (const t of stream.getTracks()) t.stop();
  capture = null; stream = null;
  $('stop').disabled = true; $('hangup').disabled = true; $('start').disabled = false;
}

function fail(msg) {
  state.errors.push({ code: 'page', message: msg });
  setStatus(msg);
  if (ws) ws.close();
  teardown();
}

$('start').onclick = start;
$('stop').onclick = stopReply;
$('hangup').onclick = hangup;
