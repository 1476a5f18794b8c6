// The backward as one launch, where the adapter adds f32 atomically
// (SHADER_FLOAT32_ATOMIC; appended to flash_attention.wgsl only then, which
// otherwise gets an empty dq_tile): backward_kv, per block of 64 keys, also adds
// each query tile's dq rows (dS·k) to dq_sum atomically (out2, binding 9), so
// the scores and dO·vᵀ are computed once rather than once for dk and dv and
// again for dq (backward_q). dq_sum starts at zero; its rows are laid out as the
// forward's output (p[34..37]).
// Atomics make dq's summation order vary from run to run (as PyTorch's own
// memory-efficient attention backward does); dk and dv are fixed. The runtime
// prepends DQW = max(DP / 64, 1) (vec4 columns of dq per thread) and DQA = 4·DQW.
@group(0) @binding(9) var<storage, read_write> dq_sum: array<atomic<f32>>;

// acc[i·DQW + w] += Σ_r dS[4m + i][r] · k[r][4(16w + cc)..] over keys r0..r0 + n
// (n a multiple of 4): dS as backward_kv left it in the P region (32 rows of 16
// vec4s), four keys (a vec4 of each of the thread's rows) at a time, k's rows in
// the X region; the keys are summed in order. Each thread sums over every key of
// the block, so that each element of dq is added once per block: splitting the
// keys between two halves of the workgroup (twice the atomics) was 10% slower on
// an H100, and summing the halves in workgroup memory first slower still. Past
// DP = 64, DQW vec4 columns 16 apart; at DP = 32, threads with cc ≥ 8 hold nothing.
fn accumulate_dq(acc: ptr<function, array<vec4<f32>, DQA>>, r0: u32, n: u32, m: u32, cc: u32) {
    for (var r = 0u; r < n; r += 4u) {
        var x: array<vec4<f32>, 4>;
        for (var i = 0u; i < 4u; i++) {
            x[i] = sm[(4u * m + i) * 16u + (r0 + r) / 4u];
        }
        for (var e = 0u; e < 4u; e++) {
            for (var w = 0u; w < DQW; w++) {
                let y = sm[XB + (r + e) * (DP / 4u) + min(16u * w + cc, DP / 4u - 1u)];
                for (var i = 0u; i < 4u; i++) {
                    (*acc)[i * DQW + w] += x[i][e] * y;
                }
            }
        }
    }
}

// Adds rows t0..t0 + 4 (up to T) of head (b, h), columns 4(16w + cc).. of the
// launch's slice, to dq_sum.
fn add_dq(acc: ptr<function, array<vec4<f32>, DQA>>, b: u32, h: u32, t0: u32, cc: u32) {
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + i;
        if (t >= p[3]) {
            continue;
        }
        let row = b * p[34] + h * p[35] + t * p[36];
        for (var w = 0u; w < DQW; w++) {
            for (var e = 0u; e < 4u; e++) {
                let c = first_feature() + 4u * (16u * w + cc) + e;
                if (c < D) {
                    atomicAdd(&dq_sum[row + c], (*acc)[i * DQW + w][e]);
                }
            }
        }
    }
}

// Query rows t0..t0 + 32 of head (b, h) against the block of 64 keys from j0
// (k's head `kh`): dq += dS·k, added to dq_sum. dS is in the P region, where
// backward_kv stored it for dk (reading it there, rather than keeping the
// thread's score gradients in registers until now, keeps the launch at fewer
// registers); the thread takes rows 4·(li / 16).., columns 4(16w + li % 16)...
fn dq_tile(b: u32, h: u32, kh: vec3<u32>, j0: u32, t0: u32, li: u32) {
    let rg = li / 16u;
    let kg = li % 16u;
    var dq: array<vec4<f32>, DQA>;
    for (var r0 = 0u; r0 < 64u; r0 += RC) {
        workgroupBarrier();
        load_rows(K, kh, j0 + r0, RC, p[4], XB, li);
        workgroupBarrier();
        accumulate_dq(&dq, r0, RC, rg, kg);
    }
    add_dq(&dq, b, h, t0 + 4u * rg, kg);
}
