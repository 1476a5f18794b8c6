// Causal attention over a KV cache, split along the keys (flash-decoding): the
// `partial` pass gives each (chunk of 64 keys, head, query) a workgroup, which
// rotates the query by RoPE, scores the chunk's keys, and writes the chunk's max
// score, its sum of exp(score − max) and its exp-weighted sum of values; the
// `combine` pass rescales the chunks to one max and normalises. Query t sits at
// position pos + t and sees keys 0..=pos + t. Chunks past a query's keys exit at
// once, so a grid sized for the whole cache (a replayed decode step) costs
// little. Grouped-query: head h reads kv head h / (heads / kv heads).
//
// p: [0] T, [1] heads, [2] kv heads, [3] d (≤ 256, even), [4] capacity,
//    [5] qkv offset, [6] qkv row stride, [7] pos offset, [8] rope offset,
//    [9] chunks, [10] scale (f32 bits).
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> rope: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;
@group(0) @binding(4) var<storage, read> keys: array<f32>;
@group(0) @binding(5) var<storage, read> values: array<f32>;
@group(0) @binding(6) var<storage, read_write> partials: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

const CHUNK: u32 = 64u;

var<workgroup> q: array<f32, 256>;
var<workgroup> weight: array<f32, 64>;
var<workgroup> red: array<f32, 64>;

// The partial record of (query t, head h, chunk c): [max, sum, acc[0..d]].
fn record(t: u32, h: u32, c: u32) -> u32 {
    return ((t * p[1] + h) * p[9] + c) * (p[3] + 2u);
}

@compute @workgroup_size(64)
fn partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let c = wid.x;
    let h = wid.y;
    let t = wid.z;
    let d = p[3];
    let cap = p[4];
    let at = pos[p[7]] + t;
    let first = c * CHUNK;
    if first > at {
        return;
    }
    let g = h / (p[1] / p[2]);
    let half = d / 2u;
    let qx = p[5] + t * p[6] + h * d;
    for (var i = li; i < half; i += CHUNK) {
        let cs = p[8] + (at * half + i) * 2u;
        let a = qkv[qx + 2u * i];
        let b = qkv[qx + 2u * i + 1u];
        q[2u * i] = a * rope[cs] - b * rope[cs + 1u];
        q[2u * i + 1u] = a * rope[cs + 1u] + b * rope[cs];
    }
    workgroupBarrier();
    let key = first + li;
    let valid = key <= at;
    var s = -3.0e38;
    if valid {
        let kx = (g * cap + key) * d;
        var dot = 0.0;
        for (var j = 0u; j < d; j++) {
            dot += q[j] * keys[kx + j];
        }
        s = dot * bitcast<f32>(p[10]);
    }
    red[li] = s;
    workgroupBarrier();
    for (var o = CHUNK / 2u; o > 0u; o >>= 1u) {
        if li < o {
            red[li] = max(red[li], red[li + o]);
        }
        workgroupBarrier();
    }
    let m = red[0];
    workgroupBarrier();
    let e = select(0.0, exp(s - m), valid);
    weight[li] = e;
    red[li] = e;
    workgroupBarrier();
    for (var o = CHUNK / 2u; o > 0u; o >>= 1u) {
        if li < o {
            red[li] += red[li + o];
        }
        workgroupBarrier();
    }
    let base = record(t, h, c);
    let n = min(CHUNK, at + 1u - first);
    for (var j = li; j < d; j += CHUNK) {
        var acc = 0.0;
        for (var l = 0u; l < n; l++) {
            acc += weight[l] * values[(g * cap + first + l) * d + j];
        }
        partials[base + 2u + j] = acc;
    }
    if li == 0u {
        partials[base] = m;
        partials[base + 1u] = red[0];
    }
}

@compute @workgroup_size(64)
fn combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wid.x;
    let t = wid.y;
    let d = p[3];
    let chunks = (pos[p[7]] + t) / CHUNK + 1u;
    var m = -3.0e38;
    for (var c = 0u; c < chunks; c++) {
        m = max(m, partials[record(t, h, c)]);
    }
    var sum = 0.0;
    for (var c = 0u; c < chunks; c++) {
        let r = record(t, h, c);
        sum += exp(partials[r] - m) * partials[r + 1u];
    }
    let o = (t * p[1] + h) * d;
    for (var j = li; j < d; j += CHUNK) {
        var acc = 0.0;
        for (var c = 0u; c < chunks; c++) {
            let r = record(t, h, c);
            acc += exp(partials[r] - m) * partials[r + 2u + j];
        }
        out[o + j] = acc / sum;
    }
}
