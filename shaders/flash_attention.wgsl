// Fused attention for training (flash attention): softmax(scale·q·kᵀ + mask)·v
// without the T×S score matrix. Four entries, one thread per row:
//   forward     per query row: online softmax over tiles of keys in workgroup
//               memory; writes the output and the row's log-sum-exp;
//   backward_q  per query row: recomputes each score from the log-sum-exp,
//               dq = Σ_j ds_j·k_j·scale with ds = p·(g·v_j − delta);
//   backward_k  per key row: loops over the query heads that share it and over
//               tiles of queries: dk = Σ_t ds·q_t·scale;
//   backward_v  the same loops: dv = Σ_t p·g_t (apart from backward_k: one
//               thread holding four rows of the head spills its registers).
// No two threads write one row, so no atomics.
//
// p: [0] B, [1] H, [2] Hkv, [3] T, [4] S, [5] scale (f32 bits), [6] causal (0/1),
//    [7] start (query row t sits at start + t and sees keys 0..=start + t),
//    [8] q offset, [9..13] q strides (b, h, t, c), [13..18] k, [18..23] v,
//    [23..28] g (the output's gradient), [28] lse offset, [29] delta offset
//    (lse and delta contiguous [B, H, T]).
// Outputs contiguous: forward out0 [B, H, T, D] and out1 the lse [B, H, T];
// backward_q out0 dq; backward_k out0 dk, backward_v out1 dv [B, Hkv, S, D].
// The runtime prepends D (the head width), DV = ⌈D/4⌉ (a row as vec4s: one
// workgroup-memory read feeds four products; features past D are zeros) and
// TILE (rows per workgroup tile, TILE·DV <= 512: two tiles fill WebGPU's 16 KiB
// of workgroup memory).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> q: array<T>;
@group(0) @binding(2) var<storage, read> k: array<T>;
@group(0) @binding(3) var<storage, read> v: array<T>;
@group(0) @binding(4) var<storage, read> g: array<T>;
@group(0) @binding(5) var<storage, read> lse_in: array<T>;
@group(0) @binding(6) var<storage, read> delta: array<T>;
@group(0) @binding(7) var<storage, read_write> out0: array<T>;
@group(0) @binding(8) var<storage, read_write> out1: array<T>;

const WG: u32 = 64u;
// Below every score: the running max starts here (not -inf: exp(-inf + inf) is NaN).
const LOWEST: f32 = -3.0e38;

var<workgroup> tile_a: array<vec4<f32>, TILE * DV>;
var<workgroup> tile_b: array<vec4<f32>, TILE * DV>;

// Element (b, h, t, c) of the view whose offset is p[base], strides after it.
fn at(base: u32, b: u32, h: u32, t: u32, c: u32) -> u32 {
    return p[base] + b * p[base + 1u] + h * p[base + 2u] + t * p[base + 3u] + c * p[base + 4u];
}

// The operands by number, as the parameter block lists them after its first
// eight entries (each view's offset and strides take five).
const Q: u32 = 0u;
const K: u32 = 1u;
const V: u32 = 2u;
const G: u32 = 3u;

// Element i of operand `which` (a constant at every call: the branch folds).
fn operand(which: u32, i: u32) -> f32 {
    switch which {
        case 0u: {
            return f32(q[i]);
        }
        case 1u: {
            return f32(k[i]);
        }
        case 2u: {
            return f32(v[i]);
        }
        default: {
            return f32(g[i]);
        }
    }
}

// Features 4·part.. of row (b, h, t) of operand `which`; zeros past D.
fn row4(which: u32, b: u32, h: u32, t: u32, part: u32) -> vec4<f32> {
    var r = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let c = 4u * part + i;
        if (c < D) {
            r[i] = operand(which, at(8u + 5u * which, b, h, t, c));
        }
    }
    return r;
}

// Writes features 4·part.. of a contiguous row of out0 (`second`: out1) at `row`.
fn store(second: bool, row: u32, part: u32, x: vec4<f32>) {
    for (var i = 0u; i < 4u; i++) {
        let c = 4u * part + i;
        if (c < D) {
            if (second) {
                out1[row * D + c] = T(x[i]);
            } else {
                out0[row * D + c] = T(x[i]);
            }
        }
    }
}

// How many keys (from key 0) query row t sees.
fn visible(t: u32) -> u32 {
    if (p[6] == 0u) {
        return p[4];
    }
    return min(p[7] + t + 1u, p[4]);
}

// Keys j0.. of kv head (b, hk) into tile_a and their values into tile_b (zeros
// past S). Called by the whole workgroup.
fn load_keys(b: u32, hk: u32, j0: u32, li: u32) {
    workgroupBarrier();
    for (var e = li; e < TILE * DV; e += WG) {
        let j = j0 + e / DV;
        var kv = vec4<f32>(0.0);
        var vv = vec4<f32>(0.0);
        if (j < p[4]) {
            kv = row4(K, b, hk, j, e % DV);
            vv = row4(V, b, hk, j, e % DV);
        }
        tile_a[e] = kv;
        tile_b[e] = vv;
    }
    workgroupBarrier();
}

// Queries t0.. of head (b, h) into tile_a and the output's gradient for them
// into tile_b (zeros past T). Called by the whole workgroup.
fn load_queries(b: u32, h: u32, t0: u32, li: u32) {
    workgroupBarrier();
    for (var e = li; e < TILE * DV; e += WG) {
        let t = t0 + e / DV;
        var qv = vec4<f32>(0.0);
        var gv = vec4<f32>(0.0);
        if (t < p[3]) {
            qv = row4(Q, b, h, t, e % DV);
            gv = row4(G, b, h, t, e % DV);
        }
        tile_a[e] = qv;
        tile_b[e] = gv;
    }
    workgroupBarrier();
}

// The first tile of queries that sees any key of key tile `tile`: causal, its
// first key is seen from query row first_key − start on.
fn first_query_tile(tile: u32) -> u32 {
    let first_key = tile * WG;
    if (p[6] != 0u && first_key > p[7]) {
        return (first_key - p[7]) / TILE * TILE;
    }
    return 0u;
}

// The keys the workgroup's query rows see together: those of its last row.
fn keys_of_tile(tile: u32) -> u32 {
    return visible(min(tile * WG + WG, p[3]) - 1u);
}

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let b = wid.z;
    let h = wid.y;
    let hk = h / (p[1] / p[2]);
    let t = wid.x * WG + li;
    let live = t < p[3];
    let scale = bitcast<f32>(p[5]);
    var qr: array<vec4<f32>, DV>;
    var acc: array<vec4<f32>, DV>;
    if (live) {
        for (var v = 0u; v < DV; v++) {
            qr[v] = row4(Q, b, h, t, v) * scale;
            acc[v] = vec4<f32>(0.0);
        }
    }
    let n = select(0u, visible(t), live);
    var m = LOWEST;
    var l = 0.0;
    let kend = keys_of_tile(wid.x);
    for (var j0 = 0u; j0 < kend; j0 += TILE) {
        load_keys(b, hk, j0, li);
        if (j0 < n) {
            let cnt = min(TILE, n - j0);
            for (var jj = 0u; jj < cnt; jj++) {
                var d4 = vec4<f32>(0.0);
                for (var v = 0u; v < DV; v++) {
                    d4 += qr[v] * tile_a[jj * DV + v];
                }
                let sc = d4.x + d4.y + d4.z + d4.w;
                // Online softmax: rescale what was summed when the max grows
                // (rarely, after the first keys), then add this key's share.
                if (sc > m) {
                    let corr = exp(m - sc);
                    l *= corr;
                    for (var v = 0u; v < DV; v++) {
                        acc[v] *= corr;
                    }
                    m = sc;
                }
                let pj = exp(sc - m);
                l += pj;
                for (var v = 0u; v < DV; v++) {
                    acc[v] += pj * tile_b[jj * DV + v];
                }
            }
        }
    }
    if (live) {
        let row = (b * p[1] + h) * p[3] + t;
        for (var v = 0u; v < DV; v++) {
            store(false, row, v, acc[v] / l);
        }
        out1[row] = T(m + log(l));
    }
}

@compute @workgroup_size(64)
fn backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let b = wid.z;
    let h = wid.y;
    let hk = h / (p[1] / p[2]);
    let t = wid.x * WG + li;
    let live = t < p[3];
    let scale = bitcast<f32>(p[5]);
    let row = (b * p[1] + h) * p[3] + t;
    var qr: array<vec4<f32>, DV>;
    var gr: array<vec4<f32>, DV>;
    var dq: array<vec4<f32>, DV>;
    var lse = 0.0;
    var dl = 0.0;
    if (live) {
        for (var v = 0u; v < DV; v++) {
            qr[v] = row4(Q, b, h, t, v) * scale;
            gr[v] = row4(G, b, h, t, v);
            dq[v] = vec4<f32>(0.0);
        }
        lse = f32(lse_in[p[28] + row]);
        dl = f32(delta[p[29] + row]);
    }
    let n = select(0u, visible(t), live);
    let kend = keys_of_tile(wid.x);
    for (var j0 = 0u; j0 < kend; j0 += TILE) {
        load_keys(b, hk, j0, li);
        if (j0 < n) {
            let cnt = min(TILE, n - j0);
            for (var jj = 0u; jj < cnt; jj++) {
                var s4 = vec4<f32>(0.0);
                var g4_ = vec4<f32>(0.0);
                for (var v = 0u; v < DV; v++) {
                    s4 += qr[v] * tile_a[jj * DV + v];
                    g4_ += gr[v] * tile_b[jj * DV + v];
                }
                let sdot = s4.x + s4.y + s4.z + s4.w;
                let gdot = g4_.x + g4_.y + g4_.z + g4_.w;
                let ds = exp(sdot - lse) * (gdot - dl) * scale;
                for (var v = 0u; v < DV; v++) {
                    dq[v] += ds * tile_a[jj * DV + v];
                }
            }
        }
    }
    if (live) {
        for (var v = 0u; v < DV; v++) {
            store(false, row, v, dq[v]);
        }
    }
}

@compute @workgroup_size(64)
fn backward_k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let b = wid.z;
    let hk = wid.y;
    let j = wid.x * WG + li;
    let live = j < p[4];
    let scale = bitcast<f32>(p[5]);
    let group = p[1] / p[2];
    var kr: array<vec4<f32>, DV>;
    var vr: array<vec4<f32>, DV>;
    var dk: array<vec4<f32>, DV>;
    if (live) {
        for (var v = 0u; v < DV; v++) {
            kr[v] = row4(K, b, hk, j, v) * scale;
            vr[v] = row4(V, b, hk, j, v);
            dk[v] = vec4<f32>(0.0);
        }
    }
    let t_first = first_query_tile(wid.x);
    for (var gi = 0u; gi < group; gi++) {
        let h = hk * group + gi;
        for (var t0 = t_first; t0 < p[3]; t0 += TILE) {
            load_queries(b, h, t0, li);
            if (live) {
                let cnt = min(TILE, p[3] - t0);
                for (var ii = 0u; ii < cnt; ii++) {
                    let t = t0 + ii;
                    if (j >= visible(t)) {
                        continue;
                    }
                    let row = (b * p[1] + h) * p[3] + t;
                    var s4 = vec4<f32>(0.0);
                    var g4_ = vec4<f32>(0.0);
                    for (var v = 0u; v < DV; v++) {
                        s4 += kr[v] * tile_a[ii * DV + v];
                        g4_ += vr[v] * tile_b[ii * DV + v];
                    }
                    let sdot = s4.x + s4.y + s4.z + s4.w;
                    let gdot = g4_.x + g4_.y + g4_.z + g4_.w;
                    let pj = exp(sdot - f32(lse_in[p[28] + row]));
                    let ds = pj * (gdot - f32(delta[p[29] + row])) * scale;
                    for (var v = 0u; v < DV; v++) {
                        dk[v] += ds * tile_a[ii * DV + v];
                    }
                }
            }
        }
    }
    if (live) {
        let row = (b * p[2] + hk) * p[4] + j;
        for (var v = 0u; v < DV; v++) {
            store(false, row, v, dk[v]);
        }
    }
}

@compute @workgroup_size(64)
fn backward_v(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let b = wid.z;
    let hk = wid.y;
    let j = wid.x * WG + li;
    let live = j < p[4];
    let scale = bitcast<f32>(p[5]);
    let group = p[1] / p[2];
    var kr: array<vec4<f32>, DV>;
    var dv: array<vec4<f32>, DV>;
    if (live) {
        for (var v = 0u; v < DV; v++) {
            kr[v] = row4(K, b, hk, j, v) * scale;
            dv[v] = vec4<f32>(0.0);
        }
    }
    let t_first = first_query_tile(wid.x);
    for (var gi = 0u; gi < group; gi++) {
        let h = hk * group + gi;
        for (var t0 = t_first; t0 < p[3]; t0 += TILE) {
            load_queries(b, h, t0, li);
            if (live) {
                let cnt = min(TILE, p[3] - t0);
                for (var ii = 0u; ii < cnt; ii++) {
                    let t = t0 + ii;
                    if (j >= visible(t)) {
                        continue;
                    }
                    let row = (b * p[1] + h) * p[3] + t;
                    var s4 = vec4<f32>(0.0);
                    for (var v = 0u; v < DV; v++) {
                        s4 += kr[v] * tile_a[ii * DV + v];
                    }
                    let pj = exp(s4.x + s4.y + s4.z + s4.w - f32(lse_in[p[28] + row]));
                    for (var v = 0u; v < DV; v++) {
                        dv[v] += pj * tile_b[ii * DV + v];
                    }
                }
            }
        }
    }
    if (live) {
        let row = (b * p[2] + hk) * p[4] + j;
        for (var v = 0u; v < DV; v++) {
            store(true, row, v, dv[v]);
        }
    }
}
