// The backward as one launch, where the adapter adds f32 atomically
// (SHADER_FLOAT32_ATOMIC; appended to flash_attention.wgsl only then).
//   backward     per block of 64 keys, tiles of 32 query rows, as backward_kv;
//                each tile's dq rows (dS·k) are added to dq_sum atomically, so
//                the scores and dO·vᵀ are computed once rather than once for
//                dk and dv and again for dq. dq_sum starts at zero; its rows
//                are laid out as the forward's output (p[34..37]).
// Atomics make dq's summation order vary from run to run (as PyTorch's own
// memory-efficient attention backward does); dk and dv are fixed. The runtime
// prepends DQW = max(DP / 64, 1) (vec4 columns of dq per thread) and DQA = 4·DQW.
@group(0) @binding(9) var<storage, read_write> dq_sum: array<atomic<f32>>;

// acc[i·DQW + w] += Σ_r dSᵀ[r][4m + i] · k[r][4(16w + cc)..] over keys r0..r0 + n:
// dSᵀ as rows of 8 vec4s from vec4 0, k's rows in the X region. Each thread
// sums over every key of the block, so that each element of dq is added once
// per block: splitting the keys between two halves of the workgroup (twice the
// atomics) was 10% slower on an H100, and summing the halves in workgroup
// memory first slower still. Past DP = 64, DQW vec4 columns 16 apart; at
// DP = 32, threads with cc ≥ 8 hold nothing.
fn accumulate_dq(acc: ptr<function, array<vec4<f32>, DQA>>, r0: u32, n: u32, m: u32, cc: u32) {
    for (var r = 0u; r < n; r++) {
        let x = sm[(r0 + r) * 8u + m];
        for (var w = 0u; w < DQW; w++) {
            let y = sm[XB + r * (DP / 4u) + min(16u * w + cc, DP / 4u - 1u)];
            for (var i = 0u; i < 4u; i++) {
                (*acc)[i * DQW + w] += x[i] * y;
            }
        }
    }
}

// Adds rows t0..t0 + 4 (up to T) of head (b, h), columns 4(16w + cc).., to dq_sum.
fn add_dq(acc: ptr<function, array<vec4<f32>, DQA>>, b: u32, h: u32, t0: u32, cc: u32) {
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + i;
        if (t >= p[3]) {
            continue;
        }
        let row = b * p[34] + h * p[35] + t * p[36];
        for (var w = 0u; w < DQW; w++) {
            for (var e = 0u; e < 4u; e++) {
                let c = 4u * (16u * w + cc) + e;
                if (c < D) {
                    atomicAdd(&dq_sum[row + c], (*acc)[i * DQW + w][e]);
                }
            }
        }
    }
}

// Threads as in backward_kv; for dq, rows 4·(li / 16).. of the 32-row tile,
// columns 4(16w + li % 16)...
@compute @workgroup_size(128)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
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
    var t_first = 0u;
    if (p[6] != 0u && j0 > p[7]) {
        t_first = (j0 - p[7]) / 32u * 32u;
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
            let vis = visible4(t0 + 4u * rg);
            let lse = per_row(false, row0, t0 + 4u * rg);
            let dl = per_row(true, row0, t0 + 4u * rg);
            let f = keep4(row0, t0 + 4u * rg, j0 + 4u * kg);
            var pr: array<vec4<f32>, 4>;
            var ds: array<vec4<f32>, 4>;
            for (var i = 0u; i < 4u; i++) {
                var fi = vec4<f32>(0.0);
                for (var e = 0u; e < 4u; e++) {
                    fi[e] = f[e][i];
                    if (j0 + 4u * kg + e < vis[i]) {
                        pr[i][e] = exp(s[i][e] * scale - lse[i]);
                    } else {
                        pr[i][e] = 0.0;
                    }
                }
                ds[i] = pr[i] * (dp[i] * fi - dl[i]) * scale;
                pr[i] *= fi;
            }
            workgroupBarrier();
            for (var i = 0u; i < 4u; i++) {
                sm[(4u * rg + i) * 16u + kg] = pr[i];
            }
            product(&dv, og, G, gh, t0, p[3], cg, li);
            workgroupBarrier();
            for (var i = 0u; i < 4u; i++) {
                sm[(4u * rg + i) * 16u + kg] = ds[i];
            }
            product(&dk, og, Q, qh, t0, p[3], cg, li);
            // dSᵀ [64 keys][32 rows] into the P region, then dq += dS·k.
            workgroupBarrier();
            for (var e = 0u; e < 4u; e++) {
                sm[(4u * kg + e) * 8u + rg] = vec4<f32>(ds[0][e], ds[1][e], ds[2][e], ds[3][e]);
            }
            var dq: array<vec4<f32>, DQA>;
            for (var r0 = 0u; r0 < 64u; r0 += RC) {
                workgroupBarrier();
                load_rows(K, kh, j0 + r0, RC, p[4], XB, li);
                workgroupBarrier();
                accumulate_dq(&dq, r0, RC, li / 16u, li % 16u);
            }
            add_dq(&dq, b, h, t0 + 4u * (li / 16u), li % 16u);
        }
    }
    store(false, &dk, 37u, b, hk, j0 + 4u * og, p[4], cg, vec4<f32>(1.0));
    store(true, &dv, 40u, b, hk, j0 + 4u * og, p[4], cg, vec4<f32>(1.0));
}
