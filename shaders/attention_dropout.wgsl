// Dropout on attention weights, `AttentionSpec::keep`'s rule: one draw of the
// counter stream (counter_hash.wgsl) serves the 2×2 block of weights (score rows
// 2i, 2i + 1; keys 2j, 2j + 1), a byte each; a weight drops where its byte is
// below the threshold p[30] (p in 256ths; 0: no dropout) and is scaled by p[31]
// (f32 bits) elsewhere. p[32..34] are the stream's keys. A score row is
// (b·H + h)·T + t. Appended to the attention kernels that drop weights.

// The draw of the block that weight (row, key) belongs to.
fn drop_draw(row: u32, key: u32) -> u32 {
    return counter_hash(row >> 1u, key >> 1u, vec2<u32>(p[32], p[33]));
}

// The factor of weight (row, key) from its block's draw h.
fn drop_factor(h: u32, row: u32, key: u32) -> f32 {
    let byte = (h >> (8u * (2u * (row & 1u) + (key & 1u)))) & 0xffu;
    return select(0.0, bitcast<f32>(p[31]), byte >= p[30]);
}

// The factors of keys key0..key0 + 4 (key0 even) in score row `row`: two draws.
fn keep_keys4(row: u32, key0: u32) -> vec4<f32> {
    if (p[30] == 0u) {
        return vec4<f32>(1.0);
    }
    let h0 = drop_draw(row, key0);
    let h1 = drop_draw(row, key0 + 2u);
    return vec4<f32>(drop_factor(h0, row, key0), drop_factor(h0, row, key0 + 1u),
                     drop_factor(h1, row, key0 + 2u), drop_factor(h1, row, key0 + 3u));
}

// The factors of key `key` in score rows row..row + 4: a draw per pair of rows
// (three when `row` is odd).
fn keep_rows4(row: u32, key: u32) -> vec4<f32> {
    if (p[30] == 0u) {
        return vec4<f32>(1.0);
    }
    var f: vec4<f32>;
    var h = drop_draw(row, key);
    for (var i = 0u; i < 4u; i++) {
        let r = row + i;
        if (i > 0u && (r & 1u) == 0u) {
            h = drop_draw(r, key);
        }
        f[i] = drop_factor(h, r, key);
    }
    return f;
}
