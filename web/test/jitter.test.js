// Replays tests/data/jitter_vectors.json through web/jitter.js: every output sample,
// decision and counter must equal what voicepipe/core/playout/jitter.py produced.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { JitterBuffer, bestLag, crossfade } from '../jitter.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const vectors = JSON.parse(readFileSync(`${here}../../tests/data/jitter_vectors.json`, 'utf8'));
const srcBuf = Buffer.from(vectors.source.pcm16_b64, 'base64');
const source = new Int16Array(srcBuf.buffer, srcBuf.byteOffset, srcBuf.length / 2);

function slice(start, n) {
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) out[i] = source[(start + i) % source.length];
  return out;
}

function replay(c) {
  const jb = new JitterBuffer(c.params, true);
  const outs = [];
  for (const e of c.events) {
    const [kind, t] = e;
    if (kind === 'push') {
      const [, , reply, seq, media, src, n, last] = e;
      jb.push(seq, media, slice(src, n), t, reply, Boolean(last));
    } else if (kind === 'pull') {
      outs.push(Int16Array.from(jb.pull(e[2], t)));
    } else if (kind === 'end') {
      jb.endReply(e[2]);
    } else if (kind === 'clear') {
      jb.clear(e[2] < 0 ? null : e[2]);
    } else {
      throw new Error(`unknown event ${kind}`);
    }
  }
  let n = 0;
  for (const o of outs) n += o.length;
  const out = new Int16Array(n);
  let off = 0;
  for (const o of outs) { out.set(o, off); off += o.length; }
  const last = c.events.length ? c.events[c.events.length - 1][1] : null;
  return { out, stats: jb.stats(last), playouts: jb.playoutDict(), ops: jb.ops };
}

test('vectors exist and cover the required traces', () => {
  const names = vectors.cases.map((c) => c.name);
  for (const want of ['steady', 'bursty', 'jitter', 'loss', 'reorder', 'stall', 'barge']) {
    assert.ok(names.some((n) => n.includes(want)), `no ${want} case in ${names}`);
  }
});

for (const c of vectors.cases) {
  test(`vector ${c.name}`, () => {
    const got = replay(c);
    assert.deepEqual(got.ops, c.expected.ops);
    assert.deepEqual(got.stats, c.expected.stats);
    assert.deepEqual(got.playouts, c.expected.playouts);
    assert.equal(got.out.length, c.expected.out_len);
    const sha = createHash('sha256')
      .update(Buffer.from(got.out.buffer, got.out.byteOffset, got.out.byteLength)).digest('hex');
    assert.equal(sha, c.expected.out_sha256);
  });
}

test('pitch search finds the period of a pulse train', () => {
  const x = new Int16Array(600);
  for (let i = 0; i < x.length; i++) x[i] = (i % 97) < 5 ? 8000 : -400;
  assert.equal(bestLag(x, 40, 240, 160, 1000)[0], 97);
});

test('crossfade goes from a to b', () => {
  const y = crossfade(new Int16Array(9).fill(1000), new Int16Array(9).fill(-1000));
  assert.ok(y[0] > 700 && y[8] < -700);
});
