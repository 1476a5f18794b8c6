// The demo page: Volta compiled to WebAssembly (pkg/, built by scripts/web.sh),
// computing on the page's WebGPU. `window.voltaDemo` exposes the page's state to
// the end-to-end test (web/tests/page.py).
import init, { Demo } from './pkg/volta_web.js';

const $ = (id) => document.getElementById(id);
const state = {
  status: 'loading',        // loading | ready | no-webgpu | failed
  error: null,
  adapter: null,
  firstPredictionMs: null,  // from navigation start to the first probabilities shown
  classifyMs: null,         // the last classification's round trip
  prediction: null,         // { digit, probabilities }
  predictions: 0,
  train: { running: false, done: false, steps: [], msPerStep: null, testAccuracy: null },
  chat: { loaded: null, running: false, done: false, tokens: 0, tokPerSec: null, text: '' },
  errors: [],
};
window.voltaDemo = state;

let demo = null;
// One call into the module at a time: a call borrows the Rust object until it
// returns, so calls from the pad, the trainer and the chat take turns.
let queue = Promise.resolve();
function serial(fn) {
  const run = queue.then(fn);
  queue = run.catch(() => {});
  return run;
}
const yieldToBrowser = () => new Promise((resolve) => setTimeout(resolve, 0));

function message(e) {
  return e instanceof Error ? e.message : String(e);
}
function setStatus(id, text, isError = false) {
  const el = $(id);
  el.textContent = text;
  el.classList.toggle('error', isError);
  if (isError) state.errors.push(text);
}

// ---- the drawing pad ------------------------------------------------------

const pad = $('pad');
const ctx = pad.getContext('2d', { willReadFrequently: true });
let pixels = null; // the last 8×8 input, 0..16

function clearPad() {
  ctx.fillStyle = '#000';
  ctx.fillRect(0, 0, pad.width, pad.height);
  pixels = null;
  showSeen(new Array(64).fill(0));
  showBars(null);
}

let last = null;
pad.addEventListener('pointerdown', (e) => {
  pad.setPointerCapture(e.pointerId);
  last = [e.offsetX, e.offsetY];
  stroke(e.offsetX, e.offsetY);
});
pad.addEventListener('pointermove', (e) => {
  if (last) stroke(e.offsetX, e.offsetY);
});
for (const type of ['pointerup', 'pointercancel']) {
  pad.addEventListener(type, () => { last = null; });
}
function stroke(x, y) {
  ctx.strokeStyle = '#fff';
  ctx.lineWidth = 20;
  ctx.lineCap = 'round';
  ctx.lineJoin = 'round';
  ctx.beginPath();
  ctx.moveTo(last[0], last[1]);
  ctx.lineTo(x, y);
  ctx.stroke();
  last = [x, y];
  fromDrawing();
}

// The UCI digits are 32×32 bitmaps of a size-normalised digit, counted in 4×4
// blocks: 8×8 counts in 0..16. The drawing goes the same way: its ink's bounding
// box scaled (aspect kept) into 32×32, thresholded, then counted per block.
function fromDrawing() {
  const { data } = ctx.getImageData(0, 0, pad.width, pad.height);
  let [x0, y0, x1, y1] = [pad.width, pad.height, -1, -1];
  for (let y = 0; y < pad.height; y++) {
    for (let x = 0; x < pad.width; x++) {
      if (data[4 * (y * pad.width + x)] > 64) {
        x0 = Math.min(x0, x); x1 = Math.max(x1, x);
        y0 = Math.min(y0, y); y1 = Math.max(y1, y);
      }
    }
  }
  if (x1 < 0) return;
  const w = x1 - x0 + 1, h = y1 - y0 + 1, side = Math.max(w, h);
  const small = document.createElement('canvas');
  small.width = small.height = 32;
  const s = small.getContext('2d', { willReadFrequently: true });
  s.fillStyle = '#000';
  s.fillRect(0, 0, 32, 32);
  const scale = 32 / side;
  s.drawImage(pad, x0, y0, w, h, (32 - w * scale) / 2, (32 - h * scale) / 2, w * scale, h * scale);
  const bits = s.getImageData(0, 0, 32, 32).data;
  const counts = new Array(64).fill(0);
  for (let y = 0; y < 32; y++) {
    for (let x = 0; x < 32; x++) {
      if (bits[4 * (y * 32 + x)] > 96) counts[(y >> 2) * 8 + (x >> 2)] += 1;
    }
  }
  classify(counts);
}

// Paints an 8×8 image (0..16) on the pad, blocky: for the test and the curious.
function showImage(image) {
  const cell = pad.width / 8;
  for (let i = 0; i < 64; i++) {
    const v = Math.round((image[i] / 16) * 255);
    ctx.fillStyle = `rgb(${v},${v},${v})`;
    ctx.fillRect((i % 8) * cell, Math.floor(i / 8) * cell, cell, cell);
  }
  return classify(image);
}

function showSeen(image) {
  const seen = $('seen').getContext('2d');
  const cell = 64 / 8;
  for (let i = 0; i < 64; i++) {
    const v = Math.round((image[i] / 16) * 255);
    seen.fillStyle = `rgb(${v},${v},${v})`;
    seen.fillRect((i % 8) * cell, Math.floor(i / 8) * cell, cell, cell);
  }
}

const bars = [];
for (let d = 0; d < 10; d++) {
  const row = document.createElement('div');
  row.className = 'bar';
  row.innerHTML = `<span>${d}</span><div class="track"><div class="fill"></div></div><span class="p">–</span>`;
  $('bars').append(row);
  bars.push(row);
}
function showBars(probabilities) {
  const best = probabilities ? probabilities.indexOf(Math.max(...probabilities)) : -1;
  bars.forEach((row, d) => {
    const p = probabilities ? probabilities[d] : 0;
    row.querySelector('.fill').style.width = `${(100 * p).toFixed(1)}%`;
    row.querySelector('.p').textContent = probabilities ? `${(100 * p).toFixed(1)}%` : '–';
    row.classList.toggle('best', d === best);
  });
}

// Classification runs one at a time; drawing faster than that classifies the
// latest image when the GPU is free again.
let wanted = null, busy = null;
function classify(image) {
  pixels = image;
  showSeen(image);
  wanted = image;
  if (!busy) busy = drain();
  return busy;
}
async function drain() {
  try {
    while (wanted && demo) {
      const image = wanted;
      wanted = null;
      const start = performance.now();
      const p = Array.from(await serial(() => demo.classify(new Float32Array(image))));
      state.classifyMs = performance.now() - start;
      if (state.firstPredictionMs === null) state.firstPredictionMs = performance.now();
      const digit = p.indexOf(Math.max(...p));
      state.prediction = { digit, probabilities: p };
      state.predictions += 1;
      showBars(p);
      setStatus('digits-status', `Predicted ${digit} (${(100 * p[digit]).toFixed(1)}%) in ${state.classifyMs.toFixed(1)} ms.`);
    }
  } catch (e) {
    setStatus('digits-status', `Classification failed: ${message(e)}`, true);
  } finally {
    busy = null;
  }
  return state.prediction;
}

$('clear').addEventListener('click', clearPad);

// ---- training in the tab --------------------------------------------------

const curve = $('curve');
function drawCurve() {
  const c = curve.getContext('2d');
  const { width: W, height: H } = curve;
  const pad = { l: 38, r: 60, t: 10, b: 22 };
  c.clearRect(0, 0, W, H);
  c.strokeStyle = '#dde1e8';
  c.strokeRect(pad.l, pad.t, W - pad.l - pad.r, H - pad.t - pad.b);
  const steps = state.train.steps;
  const total = state.train.total || 1;
  const maxLoss = Math.max(2.5, ...steps.map((s) => s.loss));
  const x = (i) => pad.l + ((W - pad.l - pad.r) * i) / total;
  const yLoss = (v) => pad.t + (H - pad.t - pad.b) * (1 - v / maxLoss);
  const yAcc = (v) => pad.t + (H - pad.t - pad.b) * (1 - v);
  c.font = '11px system-ui, sans-serif';
  c.fillStyle = '#c0392b';
  c.fillText('loss', 4, pad.t + 10);
  c.fillText(maxLoss.toFixed(1), 4, pad.t + 24);
  c.fillText('0', 4, H - pad.b);
  c.fillStyle = '#2f6fde';
  c.fillText('batch acc', W - pad.r + 2, pad.t + 10);
  c.fillText('100%', W - pad.r + 4, pad.t + 24);
  c.fillText('0%', W - pad.r + 4, H - pad.b);
  c.fillStyle = '#5a6375';
  c.fillText(`step ${steps.length ? steps[steps.length - 1].step : 0} / ${total}`, pad.l, H - 6);
  for (const [key, y, color] of [['loss', yLoss, '#c0392b'], ['accuracy', yAcc, '#2f6fde']]) {
    c.strokeStyle = color;
    c.lineWidth = 1.5;
    c.beginPath();
    steps.forEach((s, i) => (i ? c.lineTo(x(s.step), y(s[key])) : c.moveTo(x(s.step), y(s[key]))));
    c.stroke();
  }
}

let stopRequested = false;
async function train() {
  if (state.train.running) {
    stopRequested = true;
    return;
  }
  const epochs = Math.max(1, Math.min(20, Number($('epochs').value) || 3));
  const t = state.train;
  Object.assign(t, { running: true, done: false, steps: [], msPerStep: null, testAccuracy: null });
  stopRequested = false;
  $('train').textContent = 'Stop';
  try {
    t.total = await serial(() => demo.start_training(epochs, 1));
    let perCall = 2, spent = 0, taken = 0;
    while (!stopRequested) {
      const start = performance.now();
      const s = await serial(() => demo.train_steps(perCall));
      const ms = performance.now() - start;
      const n = s.step - taken;
      if (n === 0) break;
      taken = s.step;
      spent += ms;
      t.msPerStep = spent / taken;
      // About one frame's worth of steps per call, then the tab gets the thread.
      perCall = Math.max(1, Math.min(16, Math.round(30 / t.msPerStep)));
      const c = demo.counters();
      t.steps.push({ step: s.step, loss: s.loss, accuracy: s.accuracy, ms, n, pipelines: c.pipelines, dispatches: c.dispatches });
      drawCurve();
      setStatus('train-status', `epoch ${s.epoch.toFixed(1)} of ${epochs}: step ${s.step}/${s.total}, loss ${s.loss.toFixed(3)}, batch accuracy ${(100 * s.accuracy).toFixed(0)}%, ${t.msPerStep.toFixed(1)} ms/step`);
      if (s.step >= s.total) break;
      await yieldToBrowser();
    }
    t.testAccuracy = await serial(() => demo.finish_training());
    setStatus('train-status', `Trained ${taken} steps in ${(spent / 1000).toFixed(1)} s (${t.msPerStep.toFixed(1)} ms/step): test accuracy ${(100 * t.testAccuracy).toFixed(1)}% on 359 held-out digits. The pad now uses these weights.`);
    t.done = true;
    if (pixels) classify(pixels);
  } catch (e) {
    setStatus('train-status', `Training failed: ${message(e)}`, true);
  } finally {
    t.running = false;
    $('train').textContent = 'Train here';
  }
}
$('train').addEventListener('click', train);

// ---- chat -------------------------------------------------------------------

$('gguf').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  $('send').disabled = true;
  state.chat.loaded = null;
  setStatus('chat-status', `Reading ${file.name} (${(file.size / 1e6).toFixed(1)} MB)…`);
  try {
    const start = performance.now();
    const bytes = new Uint8Array(await file.arrayBuffer());
    const what = await serial(() => demo.load_llm(file.name, bytes));
    state.chat.loaded = what;
    setStatus('chat-status', `Loaded ${what} from ${file.name} in ${((performance.now() - start) / 1000).toFixed(1)} s.`);
    $('send').disabled = false;
  } catch (err) {
    setStatus('chat-status', `Could not load ${file.name}: ${message(err)}`, true);
  }
});

async function send() {
  const c = state.chat;
  if (c.running) return;
  Object.assign(c, { running: true, done: false, tokens: 0, tokPerSec: null, text: '' });
  $('send').disabled = true;
  const answer = $('answer');
  answer.textContent = '';
  try {
    const maxTokens = Math.max(1, Number($('max-tokens').value) || 64);
    const temperature = Math.max(0, Number($('temperature').value) || 0);
    const promptTokens = await serial(() => demo.start_chat($('prompt').value, maxTokens, temperature));
    const start = performance.now();
    let firstAt = null;
    for (;;) {
      const piece = await serial(() => demo.next_token());
      if (piece === undefined || piece === null) break;
      const now = performance.now();
      if (firstAt === null) firstAt = now;
      c.tokens += 1;
      c.text += piece;
      answer.textContent = c.text;
      if (c.tokens > 1) c.tokPerSec = (c.tokens - 1) / ((now - firstAt) / 1000);
      // Two significant digits: a CPU-emulated adapter decodes below 0.1 tok/s.
      const speed = c.tokPerSec ? `, ${c.tokPerSec >= 10 ? c.tokPerSec.toFixed(1) : c.tokPerSec.toPrecision(2)} tok/s` : '';
      setStatus('chat-status', `prompt ${promptTokens} tokens in ${((firstAt - start) / 1000).toFixed(2)} s; ${c.tokens} tokens${speed}`);
      await yieldToBrowser();
    }
    c.done = true;
  } catch (e) {
    setStatus('chat-status', `Generation failed: ${message(e)}`, true);
  } finally {
    c.running = false;
    $('send').disabled = !state.chat.loaded;
  }
}
$('send').addEventListener('click', send);
$('prompt').addEventListener('keydown', (e) => { if (e.key === 'Enter' && !$('send').disabled) send(); });

// ---- start-up -----------------------------------------------------------------

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

function disable(why) {
  for (const id of ['clear', 'train', 'send', 'gguf']) $(id).disabled = true;
  setStatus('gpu', why, true);
}

async function start() {
  clearPad();
  drawCurve();
  if (!navigator.gpu) {
    state.status = 'no-webgpu';
    disable('This browser has no WebGPU (navigator.gpu is missing). Use Chrome or Edge 113+, Safari 26+ or Firefox 141+ (Windows), with hardware acceleration on; on Linux, Chrome needs --enable-unsafe-webgpu.');
    return;
  }
  try {
    await init();
    demo = await Demo.open();
  } catch (e) {
    state.status = 'no-webgpu';
    disable(`WebGPU is present but no GPU adapter came: hardware acceleration may be off or the GPU blocklisted (Chromium on Linux needs --enable-unsafe-webgpu). Volta said: ${message(e)}`);
    return;
  }
  const a = demo.adapter();
  state.adapter = { name: a.name, backend: a.backend, deviceType: a.device_type, features: a.features, f16: a.f16, maxBinding: a.max_binding };
  $('gpu').textContent = `Running on ${a.name || 'an unnamed adapter'} — backend ${a.backend}, device type ${a.device_type}, features: ${a.features || 'none'}; f16 ${a.f16 ? 'yes' : 'no'}; max binding ${(a.max_binding / 2 ** 20).toFixed(0)} MiB.`;
  try {
    const [weights, digits] = await Promise.all([fetchBytes('digits.safetensors'), fetchBytes('digits.csv.gz')]);
    await serial(() => demo.load_weights(weights));
    const n = await serial(() => demo.load_digits(digits));
    setStatus('digits-status', `Trained weights loaded; ${n} digits ready for training. Draw a digit.`);
    state.status = 'ready';
  } catch (e) {
    state.status = 'failed';
    state.error = message(e);
    setStatus('digits-status', `Could not load the model or the digits: ${message(e)}`, true);
  }
}

state.showImage = showImage;
// For tests and the console: run `fn(demo)` in turn with the page's own calls.
state.call = (fn) => serial(() => fn(demo));
state.counters = () => serial(() => {
  const c = demo.counters();
  return { pipelines: c.pipelines, dispatches: c.dispatches, submissions: c.submissions, hostWaits: c.host_waits };
});
start();
