const D: u32 = 64u;
const DP: u32 = 64u;
const NV: u32 = 2u;
const RS: u32 = 2u;
const KS: u32 = 1u;
const THREADS: u32 = 64u;
const DCF: u32 = 16u;
const DCB: u32 = 16u;
const RC: u32 = 32u;
const SMEM: u32 = 1344u;
@group(0) @binding(1) var<storage, read> q: array<vec4<T>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<T>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<T>>;
@group(0) @binding(4) var<storage, read> g: array<vec4<T>>;
const VEC: bool = true;
// Element i of operand `which` (a constant at every call: the branch folds).
fn operand(which: u32, i: u32) -> f32 {
    switch which {
        case 0u: { return f32(q[i >> 2u][i & 3u]); }
        case 1u: { return f32(k[i >> 2u][i & 3u]); }
        case 2u: { return f32(v[i >> 2u][i & 3u]); }
        default: { return f32(g[i >> 2u][i & 3u]); }
    }
}
// The vec4 i of operand `which` (VEC only).
fn operand4(which: u32, i: u32) -> vec4<f32> {
    switch which {
        case 0u: { return vec4<f32>(q[i]); }
        case 1u: { return vec4<f32>(k[i]); }
        case 2u: { return vec4<f32>(v[i]); }
        default: { return vec4<f32>(g[i]); }
    }
}
// Fused attention for training (flash attention): softmax(scale·q·kᵀ + mask)·v
// without the T×S score matrix, tiled like a GEMM. Each thread holds a tile of
// scores and a slice of its outputs in registers. Three entries, one per file
// (the runtime joins this file, the entry's and counter_hash.wgsl):
//   forward      per block of 64 query rows, tiles of BK keys: S = q·kᵀ, online
//                softmax (the row max shared through workgroup memory), O += P·v;
//                writes O and each row's log-sum-exp;
//   backward_q   per block of 64 query rows, tiles of BK keys: recomputes P from
//                the log-sum-exp, dS = P·(dO·vᵀ − delta), dq += dS·k;
//   backward_kv  per block of 64 keys, tiles of 32 query rows (of every query
//                head that shares the key head): dv += Pᵀ·dO, dk += dSᵀ·q.
// Every output row has one owner, so no atomics. Causal tiles above the
// diagonal are skipped.
//
// Threads of the row-block entries: eight key groups (kg) by 16 / RS row groups
// (rg). A thread holds RS strips of four rows, 4·(rg + NRG·a).. (strip a), by KS
// strips of four keys, 4·kg + 32·e.. (strip e): 4×4 scores with RS = KS = 1
// (128 threads, any head width), 8×8 with RS = KS = 2 (64 threads, twice the
// multiply-adds per read of workgroup memory; heads up to 64 wide, for registers).
//
// Workgroup memory: the P region (a 64×BK or 32×64 tile of probabilities or
// score gradients, rows of 16 vec4s), then the X region (the rest, from vec4
// XB), which holds the score products' operands transposed, a chunk of DCF
// (forward) or DCB (backward) features at a time (rows padded by 4 floats so
// that the stores are free of bank conflicts), then the output products'
// operand as rows, RC at a time. The runtime sizes the chunks to the adapter's
// workgroup memory: larger chunks, fewer barriers.
//
// p: [0] B, [1] H, [2] Hkv, [3] T, [4] S, [5] scale (f32 bits), [6] causal (0/1),
//    [7] start (query row t sits at start + t and sees keys 0..=start + t),
//    [8] q offset, [9..13] q strides (b, h, t, c), [13..18] k, [18..23] v,
//    [23..28] g (the output's gradient), [28] lse offset, [29] delta offset
//    (lse and delta contiguous [B, H, T]), [30] dropout p (f32 bits, 0: none),
//    [31] a kept weight's factor 1/(1 − p) (f32 bits), [32..34] the two keys
//    the counter stream derives from the seed (`random::stream_keys`),
//    [34..37] the (b, h, t) strides of the forward's output and of dq,
//    [37..40] those of dk, [40..43] those of dv (features contiguous: each
//    result is laid out as `packed_like` its operand).
// Outputs: forward out0 [B, H, T, D] and out1 the lse [B, H, T] (contiguous);
// backward_q out0 dq; backward_kv out0 dk and out1 dv [B, Hkv, S, D].
// The runtime prepends D (the head width), DP (D rounded up to a power of two
// >= 32: a row in workgroup memory, zeros past D), NV = DP / 32 (vec4 columns
// per thread), RS, KS, THREADS (= 128 / RS), DCF, DCB, RC and SMEM (vec4s of
// workgroup memory).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
// q, k, v and g (bindings 1 to 4), `VEC` and the functions that read them,
// `operand` (one element) and `operand4` (four features: a vec4), come from
// the runtime: with VEC, every view's features are contiguous and its offset
// and strides multiples of 4, so the tiles load four features at a time.
@group(0) @binding(5) var<storage, read> lse_in: array<T>;
@group(0) @binding(6) var<storage, read> delta: array<T>;
@group(0) @binding(7) var<storage, read_write> out0: array<T>;
@group(0) @binding(8) var<storage, read_write> out1: array<T>;

// Row groups, keys per tile, score accumulators and output accumulators per thread.
const NRG: u32 = 16u / RS;
const BK: u32 = 32u * KS;
const SACC: u32 = 4u * RS * KS;
const ACC: u32 = 4u * RS * NV;
// Below every score: the running max starts here (not -inf: exp(-inf + inf) is NaN).
const LOWEST: f32 = -3.0e38;
// The X region's first vec4.
const XB: u32 = 16u * BK;
var<workgroup> sm: array<vec4<f32>, SMEM>;

// The operands by number, as the parameter block lists them after its first
// eight entries (each view's offset and strides take five).
const Q: u32 = 0u;
const K: u32 = 1u;
const V: u32 = 2u;
const G: u32 = 3u;

// Head (b, h) of operand `which`: its first element and its row and feature strides.
fn head(which: u32, b: u32, h: u32) -> vec3<u32> {
    let s = 8u + 5u * which;
    return vec3<u32>(p[s] + b * p[s + 1u] + h * p[s + 2u], p[s + 3u], p[s + 4u]);
}

// Element (t, c) of a head, zero past `rows` rows or D features.
fn element(which: u32, hd: vec3<u32>, t: u32, rows: u32, c: u32) -> f32 {
    if (t < rows && c < D) {
        return operand(which, hd.x + t * hd.y + c * hd.z);
    }
    return 0.0;
}

// Writes scalar i of the workgroup memory.
fn put(i: u32, x: f32) {
    sm[i >> 2u][i & 3u] = x;
}

// Features c0..c0 + dc of rows t0..t0 + n of a head, transposed: feature c of
// row t lands at (float) dst + c·(n + 4) + t.
fn load_transposed(which: u32, hd: vec3<u32>, t0: u32, n: u32, rows: u32, c0: u32, dc: u32, dst: u32, li: u32) {
    if (VEC) {
        let dc4 = dc / 4u;
        for (var e = li; e < dc4 * n; e += THREADS) {
            let t = e / dc4;
            let c = 4u * (e % dc4);
            var x = vec4<f32>(0.0);
            if (t0 + t < rows && c0 + c < D) {
                x = operand4(which, (hd.x + (t0 + t) * hd.y + c0 + c) / 4u);
            }
            for (var i = 0u; i < 4u; i++) {
                put(dst + (c + i) * (n + 4u) + t, x[i]);
            }
        }
        return;
    }
    for (var e = li; e < dc * n; e += THREADS) {
        let t = e / dc;
        let c = e % dc;
        put(dst + c * (n + 4u) + t, element(which, hd, t0 + t, rows, c0 + c));
    }
}

// Rows t0..t0 + n of a head, DP features each, at vec4 `dst` (row-major).
fn load_rows(which: u32, hd: vec3<u32>, t0: u32, n: u32, rows: u32, dst: u32, li: u32) {
    for (var e = li; e < n * (DP / 4u); e += THREADS) {
        let t = e / (DP / 4u);
        let c = 4u * (e % (DP / 4u));
        var x = vec4<f32>(0.0);
        if (VEC) {
            if (t0 + t < rows && c < D) {
                x = operand4(which, (hd.x + (t0 + t) * hd.y + c) / 4u);
            }
        } else {
            for (var i = 0u; i < 4u; i++) {
                x[i] = element(which, hd, t0 + t, rows, c + i);
            }
        }
        sm[dst + e] = x;
    }
}

// s[(4ra + i)·KS + e] (four columns) += Σ_c a[c][4(m + NRG·ra) + i] ·
// b[c][4(n + 8e)..] over `dc` rows of two transposed tiles at vec4s `a` and `b`
// with row lengths `la` and `lb` vec4s.
fn scores(s: ptr<function, array<vec4<f32>, SACC>>, a: u32, la: u32, m: u32, b: u32, lb: u32, n: u32, dc: u32) {
    for (var c = 0u; c < dc; c++) {
        var x: array<vec4<f32>, RS>;
        var y: array<vec4<f32>, KS>;
        for (var ra = 0u; ra < RS; ra++) {
            x[ra] = sm[a + c * la + m + NRG * ra];
        }
        for (var e = 0u; e < KS; e++) {
            y[e] = sm[b + c * lb + n + 8u * e];
        }
        for (var ra = 0u; ra < RS; ra++) {
            for (var i = 0u; i < 4u; i++) {
                for (var e = 0u; e < KS; e++) {
                    (*s)[(4u * ra + i) * KS + e] += x[ra][i] * y[e];
                }
            }
        }
    }
}

// acc[(4ra + i)·NV + w] += Σ_r a[r][4(m + NRG·ra) + i] · x[r][32w + 4cg..] over
// `n` rows: a tile of P or dS (rows of 16 vec4s at vec4 `a`, from row `r0`)
// times rows of a DP-wide operand in the X region.
fn accumulate(acc: ptr<function, array<vec4<f32>, ACC>>, a: u32, r0: u32, m: u32, n: u32, cg: u32) {
    for (var r = 0u; r < n; r++) {
        var x: array<vec4<f32>, RS>;
        for (var ra = 0u; ra < RS; ra++) {
            x[ra] = sm[a + (r0 + r) * 16u + m + NRG * ra];
        }
        for (var w = 0u; w < NV; w++) {
            let y = sm[XB + r * (DP / 4u) + 8u * w + cg];
            for (var ra = 0u; ra < RS; ra++) {
                for (var i = 0u; i < 4u; i++) {
                    (*acc)[(4u * ra + i) * NV + w] += x[ra][i] * y;
                }
            }
        }
    }
}

// acc += the P or dS tile (`n` rows from vec4 0) times rows t0..t0 + n of
// operand `which`, RC rows at a time through the X region.
fn product(acc: ptr<function, array<vec4<f32>, ACC>>, m: u32, which: u32, hd: vec3<u32>, t0: u32, n: u32, rows: u32, cg: u32, li: u32) {
    for (var r0 = 0u; r0 < n; r0 += RC) {
        workgroupBarrier();
        load_rows(which, hd, t0 + r0, RC, rows, XB, li);
        workgroupBarrier();
        accumulate(acc, 0u, r0, m, RC, cg);
    }
}

// Writes rows t0..t0 + 4 (up to `rows`) of head (b, h), strip `ra` of the
// accumulators, into out0 (`second`: out1), columns 32w + 4cg.., each scaled;
// `at`: the parameter index of the result's (b, h, t) strides.
fn store(second: bool, acc: ptr<function, array<vec4<f32>, ACC>>, ra: u32, at: u32, b: u32, h: u32, t0: u32, rows: u32, cg: u32, by: vec4<f32>) {
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + i;
        if (t >= rows) {
            continue;
        }
        let row = b * p[at] + h * p[at + 1u] + t * p[at + 2u];
        for (var w = 0u; w < NV; w++) {
            for (var e = 0u; e < 4u; e++) {
                let c = 32u * w + 4u * cg + e;
                if (c < D) {
                    let x = T((*acc)[(4u * ra + i) * NV + w][e] * by[i]);
                    if (second) {
                        out1[row + c] = x;
                    } else {
                        out0[row + c] = x;
                    }
                }
            }
        }
    }
}

// The first query row of workgroup x's block. Causal blocks of later rows see
// more keys: they go first, so that the short ones fill the last wave.
fn query_block(x: u32) -> u32 {
    if (p[6] != 0u) {
        return ((p[3] + 63u) / 64u - 1u - x) * 64u;
    }
    return x * 64u;
}

// How many keys (from key 0) query row t sees.
fn visible(t: u32) -> u32 {
    if (p[6] == 0u) {
        return p[4];
    }
    return min(p[7] + t + 1u, p[4]);
}

// How many keys query rows t0..t0 + n see together: those of the last live row.
fn keys_of_block(t0: u32, n: u32) -> u32 {
    return visible(min(t0 + n, p[3]) - 1u);
}

// How many keys each of rows t0..t0 + 4 sees (0 past T).
fn visible4(t0: u32) -> vec4<u32> {
    var n = vec4<u32>(0u);
    for (var i = 0u; i < 4u; i++) {
        if (t0 + i < p[3]) {
            n[i] = visible(t0 + i);
        }
    }
    return n;
}

// Four values of a [B, H, T] row vector (lse, or `second`: delta) from row t0,
// zeros past T.
fn per_row(second: bool, row0: u32, t0: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        if (t0 + i < p[3]) {
            if (second) {
                x[i] = f32(delta[p[29] + row0 + t0 + i]);
            } else {
                x[i] = f32(lse_in[p[28] + row0 + t0 + i]);
            }
        }
    }
    return x;
}

// The factor of the weight of key `key` in score row `row` ((b·H + h)·T + t):
// 0 where it drops, 1/(1 − p) elsewhere; `AttentionSpec::keep`'s rule, the
// counter stream of `uniform` at element key·2³² + row (counter_hash.wgsl,
// prepended by the runtime).
fn keep(row: u32, key: u32) -> f32 {
    if (p[30] == 0u) {
        return 1.0;
    }
    let u = unit24(counter_hash(row, key, vec2<u32>(p[32], p[33])));
    return select(0.0, bitcast<f32>(p[31]), u >= bitcast<f32>(p[30]));
}

// The factors of a thread's 4×4 weights: rows t0 + i (score rows row0 + t0 + i),
// keys k0 + e, as [e][i].
fn keep4(row0: u32, t0: u32, k0: u32) -> array<vec4<f32>, 4> {
    var f: array<vec4<f32>, 4>;
    for (var e = 0u; e < 4u; e++) {
        for (var i = 0u; i < 4u; i++) {
            f[e][i] = keep(row0 + t0 + i, k0 + e);
        }
    }
    return f;
}


// dq for a block of 64 query rows, against every key tile it sees. Threads as
// in the forward.
@compute @workgroup_size(THREADS)
fn backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let b = wid.z;
    let h = wid.y;
    let hk = h / (p[1] / p[2]);
    let r0 = query_block(wid.x);
    let rg = li / 8u;
    let kg = li % 8u;
    let scale = bitcast<f32>(p[5]);
    let qh = head(Q, b, h);
    let kh = head(K, b, hk);
    let vh = head(V, b, hk);
    let gh = head(G, b, h);
    let row0 = (b * p[1] + h) * p[3];
    var vis: array<vec4<u32>, RS>;
    var lse: array<vec4<f32>, RS>;
    var dl: array<vec4<f32>, RS>;
    for (var ra = 0u; ra < RS; ra++) {
        let t0 = r0 + 4u * (rg + NRG * ra);
        vis[ra] = visible4(t0);
        lse[ra] = per_row(false, row0, t0);
        dl[ra] = per_row(true, row0, t0);
    }
    var dq: array<vec4<f32>, ACC>;
    // Qᵀ [DCB][68], Kᵀ [DCB][BK + 4], dOᵀ [DCB][68], Vᵀ [DCB][BK + 4] (floats).
    let lk = BK + 4u;
    let kt = 4u * XB + DCB * 68u;
    let gt = kt + DCB * lk;
    let vt = gt + DCB * 68u;
    let kend = keys_of_block(r0, 64u);
    for (var j0 = 0u; j0 < kend; j0 += BK) {
        var s: array<vec4<f32>, SACC>;
        var dp: array<vec4<f32>, SACC>;
        for (var c0 = 0u; c0 < D; c0 += DCB) {
            workgroupBarrier();
            load_transposed(Q, qh, r0, 64u, p[3], c0, DCB, 4u * XB, li);
            load_transposed(K, kh, j0, BK, p[4], c0, DCB, kt, li);
            load_transposed(G, gh, r0, 64u, p[3], c0, DCB, gt, li);
            load_transposed(V, vh, j0, BK, p[4], c0, DCB, vt, li);
            workgroupBarrier();
            scores(&s, XB, 17u, rg, kt / 4u, lk / 4u, kg, DCB);
            scores(&dp, gt / 4u, 17u, rg, vt / 4u, lk / 4u, kg, DCB);
        }
        // dSᵀ [BK keys][64 rows] into the P region (dropout scales dO·vᵀ).
        workgroupBarrier();
        for (var ra = 0u; ra < RS; ra++) {
            for (var e = 0u; e < KS; e++) {
                let k0 = j0 + 4u * kg + 32u * e;
                let f = keep4(row0, r0 + 4u * (rg + NRG * ra), k0);
                var dst: array<vec4<f32>, 4>;
                for (var i = 0u; i < 4u; i++) {
                    let n = (4u * ra + i) * KS + e;
                    for (var j = 0u; j < 4u; j++) {
                        if (k0 + j < vis[ra][i]) {
                            let pr = exp(s[n][j] * scale - lse[ra][i]);
                            dst[j][i] = pr * (dp[n][j] * f[j][i] - dl[ra][i]) * scale;
                        }
                    }
                }
                for (var j = 0u; j < 4u; j++) {
                    sm[(4u * kg + 32u * e + j) * 16u + rg + NRG * ra] = dst[j];
                }
            }
        }
        product(&dq, rg, K, kh, j0, BK, p[4], kg, li);
    }
    for (var ra = 0u; ra < RS; ra++) {
        store(false, &dq, ra, 34u, b, h, r0 + 4u * (rg + NRG * ra), p[3], kg, vec4<f32>(1.0));
    }
}
// The counter-based hash of `volta::random::uniform_hash`, the same integer
// operations, so every device draws the same numbers bit for bit. Prepended to the
// kernels that draw (uniform.wgsl, flash_attention.wgsl's dropout).

// lowbias32 (Chris Wellons): a bijection of u32 with good avalanche.
fn mix(v: u32) -> u32 {
    var h = v;
    h ^= h >> 16u;
    h *= 0x7feb352du;
    h ^= h >> 15u;
    h *= 0x846ca68bu;
    h ^= h >> 16u;
    return h;
}

// The two keys of the stream with seed words (lo, hi) (`random::stream_keys`).
fn stream_keys(lo: u32, hi: u32) -> vec2<u32> {
    let k0 = mix(lo ^ 0x9e3779b9u);
    return vec2<u32>(k0, mix(hi ^ k0 ^ 0x7f4a7c15u));
}

// 32 random bits of element i1·2³² + i0 of the stream with keys k.
fn counter_hash(i0: u32, i1: u32, k: vec2<u32>) -> u32 {
    var h = mix(i0 ^ k.x);
    h = mix(h ^ i1 ^ k.y);
    return mix(h ^ k.x);
}

// The top 24 bits of h scaled into [0, 1): exact in f32 (`random::uniform_at`).
fn unit24(h: u32) -> f32 {
    return f32(h >> 8u) * bitcast<f32>(0x33800000u);
}
