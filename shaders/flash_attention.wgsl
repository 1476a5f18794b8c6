// Fused attention for training (flash attention): softmax(scale·q·kᵀ + mask)·v
// without the T×S score matrix, tiled like a GEMM. 128 threads per workgroup,
// each holding a 4×4 tile of scores and a 4-row slice of its outputs in
// registers. Three entries:
//   forward      per block of 64 query rows, tiles of 32 keys: S = q·kᵀ, online
//                softmax (the row max shared through workgroup memory), O += P·v;
//                writes O and each row's log-sum-exp;
//   backward_q   per block of 64 query rows, tiles of 32 keys: recomputes P from
//                the log-sum-exp, dS = P·(dO·vᵀ − delta), dq += dS·k;
//   backward_kv  per block of 64 keys, tiles of 32 query rows (of every query
//                head that shares the key head): dv += Pᵀ·dO, dk += dSᵀ·q; and
//                where the adapter adds f32 atomically, dq too (dq_tile, in
//                flash_attention_atomic.wgsl), so that backward_q is not run.
// In the two-launch backward every output row has one owner, so no atomics.
// Causal tiles above the diagonal are skipped, and so are the tiles outside a
// batch element's range of keys (padding). A row that sees no key gives zeros.
//
// Workgroup memory: the P region (a 64×32 or 32×64 tile of probabilities or
// score gradients, 512 vec4s), then the X region (the rest), which holds the
// score products' operands transposed, a chunk of DCF (forward) or DCB
// (backward) features at a time (rows padded by 4 floats so that the stores
// are free of bank conflicts), then the output products' operand as rows, RC
// at a time. The runtime sizes the chunks to the adapter's workgroup memory:
// larger chunks, fewer barriers; WebGPU's default 16 KiB takes 16 and 8.
//
// p: [0] B, [1] H, [2] Hkv, [3] T, [4] S, [5] scale (f32 bits), [6] causal (0/1),
//    [7] start (query row t sits at start + t and sees keys 0..=start + t),
//    [8] q offset, [9..13] q strides (b, h, t, c), [13..18] k, [18..23] v,
//    [23..28] g (the output's gradient), [28] lse offset, [29] delta offset
//    (lse and delta contiguous [B, H, T]), [30] dropout's threshold (p in
//    256ths, 0: none), [31] a kept weight's factor 1/(1 − p) (f32 bits),
//    [32..34] the two keys the counter stream derives from the seed
//    (`random::stream_keys`; attention_dropout.wgsl),
//    [34..37] the (b, h, t) strides of the forward's output and of dq,
//    [37..40] those of dk, [40..43] those of dv (features contiguous: each
//    result is laid out as `packed_like` its operand), [43] the first feature
//    of the slice of the head this launch writes (0 unless D > DP),
//    [44 + 2b], [45 + 2b]: the keys [lo, hi) that batch element b's queries
//    see (0 and S without padding).
// Outputs: forward out0 [B, H, T, D] and out1 the lse [B, H, T] (contiguous);
// backward_q out0 dq; backward_kv out0 dk and out1 dv [B, Hkv, S, D] (and,
// in the one-launch backward, dq_sum at binding 9).
// The runtime prepends D (the head width), DP (D rounded up to a power of two
// >= 32, at most 256: a row in workgroup memory, zeros past D), NV = DP / 32
// (vec4 columns per thread), ACC = 4·NV, DCF, DCB, RC, SMEM (vec4s of
// workgroup memory) and SLICED (D > DP). A head wider than DP takes one launch
// per slice of DP features (p[43]): each computes the scores over all D
// features and writes its slice of the outputs.
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

const THREADS: u32 = 128u;
// Below every score: the running max starts here (not -inf: exp(-inf + inf) is NaN).
const LOWEST: f32 = -3.0e38;
// The X region's first vec4.
const XB: u32 = 512u;
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

// The first feature of the slice of the head whose outputs this launch writes
// (0 unless SLICED: heads of up to DP features never read it).
fn first_feature() -> u32 {
    if (SLICED) {
        return p[43];
    }
    return 0u;
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

// Rows t0..t0 + n of a head, the DP features of this launch's slice each, at
// vec4 `dst` (row-major).
fn load_rows(which: u32, hd: vec3<u32>, t0: u32, n: u32, rows: u32, dst: u32, li: u32) {
    for (var e = li; e < n * (DP / 4u); e += THREADS) {
        let t = e / (DP / 4u);
        let c = first_feature() + 4u * (e % (DP / 4u));
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

// s[i] (four columns) += Σ_c a[c][4m + i] · b[c][4n..4n + 4] over `dc` rows of
// two transposed tiles at vec4s `a` and `b` with row lengths `la` and `lb` vec4s.
fn scores(s: ptr<function, array<vec4<f32>, 4>>, a: u32, la: u32, m: u32, b: u32, lb: u32, n: u32, dc: u32) {
    for (var c = 0u; c < dc; c++) {
        let x = sm[a + c * la + m];
        let y = sm[b + c * lb + n];
        for (var i = 0u; i < 4u; i++) {
            (*s)[i] += x[i] * y;
        }
    }
}

// acc[i·NV + w] += Σ_r a[r][4m + i] · x[r][32w + 4cg..] over `n` rows: a tile of
// P or dS (rows of 16 vec4s at vec4 `a`, from row `r0`) times rows of a DP-wide
// operand in the X region.
fn accumulate(acc: ptr<function, array<vec4<f32>, ACC>>, a: u32, r0: u32, m: u32, n: u32, cg: u32) {
    for (var r = 0u; r < n; r++) {
        let x = sm[a + (r0 + r) * 16u + m];
        for (var w = 0u; w < NV; w++) {
            let y = sm[XB + r * (DP / 4u) + 8u * w + cg];
            for (var i = 0u; i < 4u; i++) {
                (*acc)[i * NV + w] += x[i] * y;
            }
        }
    }
}

// acc += the P or dS tile (32 rows from vec4 0) times rows t0..t0 + 32 of
// operand `which`, RC rows at a time through the X region.
fn product(acc: ptr<function, array<vec4<f32>, ACC>>, m: u32, which: u32, hd: vec3<u32>, t0: u32, rows: u32, cg: u32, li: u32) {
    for (var r0 = 0u; r0 < 32u; r0 += RC) {
        workgroupBarrier();
        load_rows(which, hd, t0 + r0, RC, rows, XB, li);
        workgroupBarrier();
        accumulate(acc, 0u, r0, m, RC, cg);
    }
}

// Writes rows t0..t0 + 4 (up to `rows`) of head (b, h) into out0 (`second`:
// out1), columns 32w + 4cg.. of the launch's slice, each scaled; `at`: the
// parameter index of the result's (b, h, t) strides.
fn store(second: bool, acc: ptr<function, array<vec4<f32>, ACC>>, at: u32, b: u32, h: u32, t0: u32, rows: u32, cg: u32, by: vec4<f32>) {
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + i;
        if (t >= rows) {
            continue;
        }
        let row = b * p[at] + h * p[at + 1u] + t * p[at + 2u];
        for (var w = 0u; w < NV; w++) {
            for (var e = 0u; e < 4u; e++) {
                let c = first_feature() + 32u * w + 4u * cg + e;
                if (c < D) {
                    let x = T((*acc)[i * NV + w][e] * by[i]);
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

// The first key that the queries of batch element b see.
fn first_key(b: u32) -> u32 {
    return p[44u + 2u * b];
}

// The end of the keys that query row t of batch element b sees: they are
// first_key(b)..visible(b, t), none where that is empty.
fn visible(b: u32, t: u32) -> u32 {
    var end = p[45u + 2u * b];
    if (p[6] != 0u) {
        end = min(p[7] + t + 1u, end);
    }
    return end;
}

// The end of the keys that query rows t0..t0 + n see together: those of the
// last live row.
fn keys_of_block(b: u32, t0: u32, n: u32) -> u32 {
    return visible(b, min(t0 + n, p[3]) - 1u);
}

// The end of the keys that each of rows t0..t0 + 4 sees (0 past T).
fn visible4(b: u32, t0: u32) -> vec4<u32> {
    var n = vec4<u32>(0u);
    for (var i = 0u; i < 4u; i++) {
        if (t0 + i < p[3]) {
            n[i] = visible(b, t0 + i);
        }
    }
    return n;
}

// Whether key j is one that a row whose keys end at `end` sees.
fn sees(j: u32, lo: u32, end: u32) -> bool {
    return j >= lo && j < end;
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

// The dropout factors of a thread's 4×4 weights: rows t0 + i (score rows
// row0 + t0 + i), keys k0 + e (k0 even), as [e][i]; attention_dropout.wgsl's
// rule, each pair of keys drawn once per pair of rows.
fn keep4(row0: u32, t0: u32, k0: u32) -> array<vec4<f32>, 4> {
    var f: array<vec4<f32>, 4>;
    if (p[30] == 0u) {
        for (var e = 0u; e < 4u; e++) {
            f[e] = vec4<f32>(1.0);
        }
        return f;
    }
    for (var e = 0u; e < 4u; e += 2u) {
        var h = drop_draw(row0 + t0, k0 + e);
        for (var i = 0u; i < 4u; i++) {
            let r = row0 + t0 + i;
            if (i > 0u && (r & 1u) == 0u) {
                h = drop_draw(r, k0 + e);
            }
            f[e][i] = drop_factor(h, r, k0 + e);
            f[e + 1u][i] = drop_factor(h, r, k0 + e + 1u);
        }
    }
    return f;
}

fn max4(x: vec4<f32>) -> f32 {
    return max(max(x.x, x.y), max(x.z, x.w));
}

// Threads: rows 4·rg.., keys 4·kg.. of the 64×32 score tile; outputs rows
// 4·rg.., columns 32w + 4·kg...
@compute @workgroup_size(128)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
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
    let row0 = (b * p[1] + h) * p[3];
    let lo = first_key(b);
    let vis = visible4(b, r0 + 4u * rg);
    var o: array<vec4<f32>, ACC>;
    var m = vec4<f32>(LOWEST);
    var l = vec4<f32>(0.0);
    // Qᵀ chunk [DCF][68] then Kᵀ chunk [DCF][36], in floats from the X region.
    let kt = 4u * XB + DCF * 68u;
    let kend = keys_of_block(b, r0, 64u);
    for (var j0 = lo / 32u * 32u; j0 < kend; j0 += 32u) {
        var s: array<vec4<f32>, 4>;
        for (var c0 = 0u; c0 < D; c0 += DCF) {
            workgroupBarrier();
            load_transposed(Q, qh, r0, 64u, p[3], c0, DCF, 4u * XB, li);
            load_transposed(K, kh, j0, 32u, p[4], c0, DCF, kt, li);
            workgroupBarrier();
            scores(&s, XB, 17u, rg, kt / 4u, 9u, kg, DCF);
        }
        var part = vec4<f32>(LOWEST);
        for (var i = 0u; i < 4u; i++) {
            for (var e = 0u; e < 4u; e++) {
                if (sees(j0 + 4u * kg + e, lo, vis[i])) {
                    s[i][e] *= scale;
                } else {
                    s[i][e] = LOWEST;
                }
            }
            part[i] = max4(s[i]);
        }
        // The row max over the eight threads that share the rows.
        workgroupBarrier();
        sm[XB + kg * 16u + rg] = part;
        workgroupBarrier();
        var mnew = m;
        for (var gi = 0u; gi < 8u; gi++) {
            mnew = max(mnew, sm[XB + gi * 16u + rg]);
        }
        let corr = exp(m - mnew);
        m = mnew;
        var pt: array<vec4<f32>, 4>;
        for (var i = 0u; i < 4u; i++) {
            for (var e = 0u; e < 4u; e++) {
                if (sees(j0 + 4u * kg + e, lo, vis[i])) {
                    pt[e][i] = exp(s[i][e] - m[i]);
                } else {
                    pt[e][i] = 0.0;
                }
            }
        }
        // Each thread sums its own keys; the row sums meet at the end. The sums
        // normalise the weights before dropout, as PyTorch's.
        l = l * corr + pt[0] + pt[1] + pt[2] + pt[3];
        if (p[30] != 0u) {
            let f = keep4(row0, r0 + 4u * rg, j0 + 4u * kg);
            for (var e = 0u; e < 4u; e++) {
                pt[e] *= f[e];
            }
        }
        for (var i = 0u; i < 4u; i++) {
            for (var w = 0u; w < NV; w++) {
                o[i * NV + w] *= corr[i];
            }
        }
        // Pᵀ [32 keys][64 rows] into the P region.
        for (var e = 0u; e < 4u; e++) {
            sm[(4u * kg + e) * 16u + rg] = pt[e];
        }
        product(&o, rg, V, vh, j0, p[4], kg, li);
    }
    // The row sums over the eight threads that share the rows.
    workgroupBarrier();
    sm[XB + kg * 16u + rg] = l;
    workgroupBarrier();
    var total = vec4<f32>(0.0);
    for (var gi = 0u; gi < 8u; gi++) {
        total += sm[XB + gi * 16u + rg];
    }
    // A row that sees no key has no weight: zeros, and a log-sum-exp of 0
    // that the backward does not read.
    let none = total == vec4<f32>(0.0);
    store(false, &o, 34u, b, h, r0 + 4u * rg, p[3], kg, select(1.0 / total, vec4<f32>(0.0), none));
    // The row's log-sum-exp, written by the launch of the first slice only.
    if (kg == 0u && first_feature() == 0u) {
        for (var i = 0u; i < 4u; i++) {
            let t = r0 + 4u * rg + i;
            if (t < p[3]) {
                out1[row0 + t] = T(select(m[i] + log(total[i]), 0.0, none[i]));
            }
        }
    }
}

// Threads as in the forward.
@compute @workgroup_size(128)
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
    let lo = first_key(b);
    let vis = visible4(b, r0 + 4u * rg);
    let lse = per_row(false, row0, r0 + 4u * rg);
    let dl = per_row(true, row0, r0 + 4u * rg);
    var dq: array<vec4<f32>, ACC>;
    // Qᵀ [DCB][68], Kᵀ [DCB][36], dOᵀ [DCB][68], Vᵀ [DCB][36] (floats).
    let kt = 4u * XB + DCB * 68u;
    let gt = kt + DCB * 36u;
    let vt = gt + DCB * 68u;
    let kend = keys_of_block(b, r0, 64u);
    for (var j0 = lo / 32u * 32u; j0 < kend; j0 += 32u) {
        var s: array<vec4<f32>, 4>;
        var dp: array<vec4<f32>, 4>;
        for (var c0 = 0u; c0 < D; c0 += DCB) {
            workgroupBarrier();
            load_transposed(Q, qh, r0, 64u, p[3], c0, DCB, 4u * XB, li);
            load_transposed(K, kh, j0, 32u, p[4], c0, DCB, kt, li);
            load_transposed(G, gh, r0, 64u, p[3], c0, DCB, gt, li);
            load_transposed(V, vh, j0, 32u, p[4], c0, DCB, vt, li);
            workgroupBarrier();
            scores(&s, XB, 17u, rg, kt / 4u, 9u, kg, DCB);
            scores(&dp, gt / 4u, 17u, rg, vt / 4u, 9u, kg, DCB);
        }
        // dSᵀ [32 keys][64 rows] into the P region (dropout scales dO·vᵀ).
        let f = keep4(row0, r0 + 4u * rg, j0 + 4u * kg);
        var dst: array<vec4<f32>, 4>;
        for (var i = 0u; i < 4u; i++) {
            for (var e = 0u; e < 4u; e++) {
                if (sees(j0 + 4u * kg + e, lo, vis[i])) {
                    dst[e][i] = exp(s[i][e] * scale - lse[i]) * (dp[i][e] * f[e][i] - dl[i]) * scale;
                } else {
                    dst[e][i] = 0.0;
                }
            }
        }
        workgroupBarrier();
        for (var e = 0u; e < 4u; e++) {
            sm[(4u * kg + e) * 16u + rg] = dst[e];
        }
        product(&dq, rg, K, kh, j0, p[4], kg, li);
    }
    store(false, &dq, 34u, b, h, r0 + 4u * rg, p[3], kg, vec4<f32>(1.0));
}

// Threads: rows 4·rg.., keys 4·kg.. of the 32×64 score tile; outputs keys 4·og..,
// columns 32w + 4·cg...
@compute @workgroup_size(128)
fn backward_kv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let b = wid.z;
    let hk = wid.y;
    let j0 = wid.x * 64u;
    let rg = li / 16u;
    let kg = li % 16u;
    let og = li / 8u;
    let cg = li % 8u;
    let scale = bitcast<f32>(p[5]);
    let group = p[1] / p[2];
    let kh = head(K, b, hk);
    let vh = head(V, b, hk);
    var dk: array<vec4<f32>, ACC>;
    var dv: array<vec4<f32>, ACC>;
    // Qᵀ [DCB][36], Kᵀ [DCB][68], dOᵀ [DCB][36], Vᵀ [DCB][68] (floats).
    let kt = 4u * XB + DCB * 36u;
    let gt = kt + DCB * 68u;
    let vt = gt + DCB * 36u;
    // Causal: the first query row that sees key j0 sits at j0 − start.
    var t_first = 0u;
    if (p[6] != 0u && j0 > p[7]) {
        t_first = (j0 - p[7]) / 32u * 32u;
    }
    // A block of keys outside the batch element's range (padding) has no
    // gradient: no query row sees it.
    let lo = first_key(b);
    if (j0 + 64u <= lo || j0 >= p[45u + 2u * b]) {
        t_first = p[3];
    }
    for (var gi = 0u; gi < group; gi++) {
        let h = hk * group + gi;
        let qh = head(Q, b, h);
        let gh = head(G, b, h);
        let row0 = (b * p[1] + h) * p[3];
        for (var t0 = t_first; t0 < p[3]; t0 += 32u) {
            var s: array<vec4<f32>, 4>;
            var dp: array<vec4<f32>, 4>;
            for (var c0 = 0u; c0 < D; c0 += DCB) {
                workgroupBarrier();
                load_transposed(Q, qh, t0, 32u, p[3], c0, DCB, 4u * XB, li);
                load_transposed(K, kh, j0, 64u, p[4], c0, DCB, kt, li);
                load_transposed(G, gh, t0, 32u, p[3], c0, DCB, gt, li);
                load_transposed(V, vh, j0, 64u, p[4], c0, DCB, vt, li);
                workgroupBarrier();
                scores(&s, XB, 9u, rg, kt / 4u, 17u, kg, DCB);
                scores(&dp, gt / 4u, 9u, rg, vt / 4u, 17u, kg, DCB);
            }
            let vis = visible4(b, t0 + 4u * rg);
            let lse = per_row(false, row0, t0 + 4u * rg);
            let dl = per_row(true, row0, t0 + 4u * rg);
            // Dropout: dv takes the kept weights, dS the kept part of dO·vᵀ.
            let f = keep4(row0, t0 + 4u * rg, j0 + 4u * kg);
            var pr: array<vec4<f32>, 4>;
            var ds: array<vec4<f32>, 4>;
            for (var i = 0u; i < 4u; i++) {
                var fi = vec4<f32>(0.0);
                for (var e = 0u; e < 4u; e++) {
                    fi[e] = f[e][i];
                    if (sees(j0 + 4u * kg + e, lo, vis[i])) {
                        pr[i][e] = exp(s[i][e] * scale - lse[i]);
                    } else {
                        pr[i][e] = 0.0;
                    }
                }
                ds[i] = pr[i] * (dp[i] * fi - dl[i]) * scale;
                pr[i] *= fi;
            }
            // P [32 rows][64 keys] into the P region, then dv += Pᵀ·dO.
            workgroupBarrier();
            for (var i = 0u; i < 4u; i++) {
                sm[(4u * rg + i) * 16u + kg] = pr[i];
            }
            product(&dv, og, G, gh, t0, p[3], cg, li);
            // dS [32 rows][64 keys], then dk += dSᵀ·q.
            workgroupBarrier();
            for (var i = 0u; i < 4u; i++) {
                sm[(4u * rg + i) * 16u + kg] = ds[i];
            }
            product(&dk, og, Q, qh, t0, p[3], cg, li);
            // The one-launch backward's dq from the dS just stored
            // (flash_attention_atomic.wgsl); empty where backward_q computes dq.
            dq_tile(b, h, kh, j0, t0, li);
        }
    }
    store(false, &dk, 37u, b, hk, j0 + 4u * og, p[4], cg, vec4<f32>(1.0));
    store(true, &dv, 40u, b, hk, j0 + 4u * og, p[4], cg, vec4<f32>(1.0));
}
