// Causal attention over a KV cache, grouped-query (head h reads kv head
// h / (heads / kv heads)), queries rotated by RoPE on load. The host prepends
// `const D: u32` (the head width, even, ≤ 256) and the subgroup helpers `SHUFFLE`, `LANES`,
// `lane_sum` and `lane_max` (as for qmatmul.wgsl). The cache holds (2, kv heads,
// capacity, D): keys (rotated), then values. Query t sits at position pos + t and sees keys
// 0..=pos + t. Two entry points (a prompt's tokens go to the training
// kernels' flash-attention forward, `flash_attention.wgsl`):
//
// - `decode` (T small, usually 1): a workgroup per (split, head, query) runs an
//   online softmax over its split's keys, a tile of KT at a time. With `fresh`
//   (T = 1), this token's key and value come from `qkv` (the cache does not hold
//   them yet) and the workgroup of the group's first head and the split holding
//   the position writes them to the cache, so one kernel does a decode step's
//   attention. With one split it writes the output; with more, each writes a
//   partial record [max, sum, acc[0..D]] and `combine` rescales them.
// - `combine`: one workgroup per (head, query) merges the splits.
//
// Query rows are T consecutive tokens of one sequence (`sequences` = 0, row t at
// position pos + t, the cache (2, kv heads, capacity, D)), or one token of each
// of `sequences` sequences (row t at pos[t], the cache (2, sequences, kv heads,
// capacity, D): a batched decode step).
//
// p: [0] T, [1] heads, [2] kv heads, [3] —, [4] capacity, [5] qkv offset,
//    [6] qkv row stride, [7] pos offset, [8] rope offset, [9] splits,
//    [10] scale (f32 bits), [11] keys per split, [12] fresh (0 or 1),
//    [13] sequences.
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> rope: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;
@group(0) @binding(4) var<storage, read_write> cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
const HALF: u32 = D / 2u;
// Value features per thread in `decode` (VF, 4 when D allows), threads per value
// row, and the key groups summed in parallel.
const VF: u32 = 4u - 2u * min(D % 4u, 1u);
const TPK: u32 = D / VF;
const GROUPS: u32 = WG / TPK;
// Keys per tile of `decode`: its partial dot products (TPK per key) fill `part`.
const KT: u32 = min(WG, 4096u / TPK);
// Key (and value) rows each thread loads at once in `decode` (H100,
// 2026-11-27, attention decode of SmolLM2 at position 64: 1 row 323–335 µs a
// token, 4 rows 275–278, 8 rows 288–289).
const STEP: u32 = 4u;
const NEG: f32 = -3.0e38;

var<workgroup> q: array<f32, D>;
var<workgroup> kf: array<f32, D>;
var<workgroup> wt: array<f32, WG>;
var<workgroup> red: array<f32, WG>;
var<workgroup> vred: array<f32, GROUPS * D>;
var<workgroup> part: array<f32, TPK * KT>;

// The partial record of (query t, head h, split s): [max, sum, acc[0..D]].
fn record(t: u32, h: u32, s: u32) -> u32 {
    return ((t * p[1] + h) * p[9] + s) * (D + 2u);
}

// The first key of the query row's sequence in the cache (`decode` sets it).
var<private> seq_base: u32;

// Index of element e of kv head g's key at position k of the row's sequence
// (values: add `vals()`).
fn kv_at(g: u32, k: u32, e: u32) -> u32 {
    return seq_base + (g * p[4] + k) * D + e;
}

fn vals() -> u32 {
    return max(p[13], 1u) * p[2] * p[4] * D;
}

// The position of query row t.
fn position(t: u32) -> u32 {
    if p[13] != 0u {
        return pos[p[7] + t];
    }
    return pos[p[7]] + t;
}

// Reductions of `decode` over all WG threads (every thread gets the result).
// With subgroups, lanes reduce by shuffles and one partial per LANES threads
// meets in shared memory: two barriers instead of a tree's nine.
fn wg_reduce(li: u32, v: f32, is_max: bool) -> f32 {
    if SHUFFLE {
        var s: f32;
        if is_max {
            s = lane_max(v);
        } else {
            s = lane_sum(v);
        }
        if li % LANES == 0u {
            red[li / LANES] = s;
        }
        workgroupBarrier();
        var r = red[0];
        for (var i = 1u; i < WG / LANES; i++) {
            r = select(r + red[i], max(r, red[i]), is_max);
        }
        workgroupBarrier();
        return r;
    }
    red[li] = v;
    workgroupBarrier();
    for (var o = WG / 2u; o > 0u; o >>= 1u) {
        if li < o {
            red[li] = select(red[li] + red[li + o], max(red[li], red[li + o]), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// Features [e, e + VF) of a value row starting at `a`, in qkv or in the cache.
fn qkv_v(a: u32) -> vec4<f32> {
    if VF == 4u {
        return vec4<f32>(qkv[a], qkv[a + 1u], qkv[a + 2u], qkv[a + 3u]);
    }
    return vec4<f32>(qkv[a], qkv[a + 1u], 0.0, 0.0);
}

fn cache_v(a: u32) -> vec4<f32> {
    if VF == 4u {
        return vec4<f32>(cache[a], cache[a + 1u], cache[a + 2u], cache[a + 3u]);
    }
    return vec4<f32>(cache[a], cache[a + 1u], 0.0, 0.0);
}

// Features [f0, f0 + VF) of row `key` of kv head g's keys (`plane` 0) or values
// (`plane` vals()), zeros from key `end` on: this token's own row `own` when
// `fresh` (the cache does not hold it yet), else the cache's.
fn cached_row(g: u32, key: u32, end: u32, at: u32, fresh: bool, own: vec4<f32>, plane: u32, f0: u32) -> vec4<f32> {
    if key >= end {
        return vec4<f32>(0.0);
    }
    if fresh && key == at {
        return own;
    }
    return cache_v(plane + kv_at(g, key, f0));
}

@compute @workgroup_size(256)
fn decode(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let s = wid.x;
    let h = wid.y;
    let t = wid.z;
    let heads = p[1];
    let kvh = p[2];
    let at = position(t);
    seq_base = select(0u, t * kvh * p[4] * D, p[13] != 0u);
    let lo = s * p[11];
    if lo > at {
        return;
    }
    let hi = min(lo + p[11], at + 1u);
    let group = heads / kvh;
    let g = h / group;
    let fresh = p[12] != 0u;
    let row = p[5] + t * p[6];
    let kq = row + (heads + g) * D;
    let vq = row + (heads + kvh + g) * D;
    for (var i = li; i < HALF; i += WG) {
        let cs = p[8] + (at * HALF + i) * 2u;
        let c = rope[cs];
        let sn = rope[cs + 1u];
        let a = qkv[row + h * D + 2u * i];
        let b = qkv[row + h * D + 2u * i + 1u];
        q[2u * i] = a * c - b * sn;
        q[2u * i + 1u] = a * sn + b * c;
        if fresh {
            let ka = qkv[kq + 2u * i];
            let kb = qkv[kq + 2u * i + 1u];
            kf[2u * i] = ka * c - kb * sn;
            kf[2u * i + 1u] = ka * sn + kb * c;
        }
    }
    workgroupBarrier();
    // This workgroup reads position `at` from kf and qkv, never from the cache.
    if fresh && h % group == 0u && at < hi {
        for (var e = li; e < D; e += WG) {
            cache[kv_at(g, at, e)] = kf[e];
            cache[vals() + kv_at(g, at, e)] = qkv[vq + e];
        }
    }
    let scale = bitcast<f32>(p[10]);
    // Keys and values are read a row at a time by TPK threads (VF features
    // each, so a row is one contiguous read): thread li takes features
    // [f0, f0 + VF) of rows gi, gi + GROUPS, ... of each tile of KT keys.
    let gi = li / TPK;
    let f0 = (li % TPK) * VF;
    let part_lane = li % TPK;
    var qr = vec4<f32>(0.0);
    var kr = vec4<f32>(0.0);
    for (var u = 0u; u < VF; u++) {
        qr[u] = q[f0 + u];
        kr[u] = kf[f0 + u];
    }
    // This token's value row, read by the thread whose features it holds.
    var vr = vec4<f32>(0.0);
    if fresh {
        vr = qkv_v(vq + f0);
    }
    var m = NEG;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    for (var base = lo; base < hi; base += KT) {
        let n = min(KT, hi - base);
        // Partial dot products of the tile's keys, summed per key below; STEP
        // keys a step, their loads in flight together (decode waits on memory).
        if gi < GROUPS {
            for (var i = gi; i < n; i += STEP * GROUPS) {
                var kv: array<vec4<f32>, STEP>;
                for (var u = 0u; u < STEP; u++) {
                    kv[u] = cached_row(g, base + i + u * GROUPS, base + n, at, fresh, kr, 0u, f0);
                }
                for (var u = 0u; u < STEP; u++) {
                    let ii = i + u * GROUPS;
                    if ii < n {
                        part[part_lane * KT + ii] = dot(qr, kv[u]);
                    }
                }
            }
        }
        workgroupBarrier();
        let valid = li < n;
        var sc = NEG;
        if valid {
            var dot = 0.0;
            for (var j = 0u; j < TPK; j++) {
                dot += part[j * KT + li];
            }
            sc = dot * scale;
        }
        let mn = max(m, wg_reduce(li, sc, true));
        let alpha = exp(m - mn);
        let e = select(0.0, exp(sc - mn), valid);
        if li < KT {
            wt[li] = e;
        }
        // The sum's barrier also publishes wt.
        l = l * alpha + wg_reduce(li, e, false);
        acc *= alpha;
        if gi < GROUPS {
            for (var i = gi; i < n; i += STEP * GROUPS) {
                var vs: array<vec4<f32>, STEP>;
                for (var u = 0u; u < STEP; u++) {
                    vs[u] = cached_row(g, base + i + u * GROUPS, base + n, at, fresh, vr, vals(), f0);
                }
                for (var u = 0u; u < STEP; u++) {
                    let ii = i + u * GROUPS;
                    if ii < n {
                        acc += wt[ii] * vs[u];
                    }
                }
            }
        }
        m = mn;
        workgroupBarrier();
    }
    if gi < GROUPS {
        for (var u = 0u; u < VF; u++) {
            vred[gi * D + f0 + u] = acc[u];
        }
    }
    workgroupBarrier();
    if li < D {
        var total = 0.0;
        for (var gg = 0u; gg < GROUPS; gg++) {
            total += vred[gg * D + li];
        }
        if p[9] == 1u {
            out[(t * heads + h) * D + li] = total / l;
        } else {
            let r = record(t, h, s);
            partials[r + 2u + li] = total;
            if li == 0u {
                partials[r] = m;
                partials[r + 1u] = l;
            }
        }
    }
}

@compute @workgroup_size(64)
fn combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wid.x;
    let t = wid.y;
    let splits = position(t) / p[11] + 1u;
    var m = NEG;
    for (var s = 0u; s < splits; s++) {
        m = max(m, partials[record(t, h, s)]);
    }
    var sum = 0.0;
    for (var s = 0u; s < splits; s++) {
        let r = record(t, h, s);
        sum += exp(partials[r] - m) * partials[r + 1u];
    }
    let o = (t * p[1] + h) * D;
    for (var j = li; j < D; j += 64u) {
        var acc = 0.0;
        for (var s = 0u; s < splits; s++) {
            let r = record(t, h, s);
            acc += exp(partials[r] - m) * partials[r + 2u + j];
        }
        out[o + j] = acc / sum;
    }
}
