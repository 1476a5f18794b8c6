// The counter-based hash of `volta::random::uniform_hash`, the same integer
// operations, so every device draws the same numbers bit for bit. Prepended to the
// kernels that draw (flash_attention.wgsl's dropout; the generated kernels'
// drawn inputs, volta-kernels' `wgsl::Draws`).

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
