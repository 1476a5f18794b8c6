//! Batched matmul on strided rank-3 views: picks tiles and load modes, then runs
//! the generated kernel of `matmul_source`.
use super::context::Context;
use super::launch::{alloc, kernel, launch, u};
use super::matmul_source::{Load, MatmulTiles, Variant, source};
use super::pipelines::Bindings;
use super::pool::Pooled;
use crate::tensor::Layout;
use std::sync::{Arc, Mutex};

/// Tiles for large products: 128×128 per workgroup, 8×8 per thread, K steps of
/// 16 (the best of the sweep at 1024–4096 on an H200, 2026-11-21).
pub(crate) const LARGE: MatmulTiles = MatmulTiles {
    bm: 128,
    bn: 128,
    bk: 16,
    tm: 8,
    tn: 8,
    prefetch: false,
};
/// Tiles for mid-sized products, where 128×128 tiles would leave the GPU's cores
/// idle: 128×64 per workgroup.
pub(crate) const MEDIUM: MatmulTiles = MatmulTiles {
    bm: 128,
    bn: 64,
    bk: 16,
    tm: 8,
    tn: 8,
    prefetch: true,
};
/// Tiles for small products: 64×64 per workgroup, 4×4 per thread.
pub(crate) const SMALL: MatmulTiles = MatmulTiles {
    bm: 64,
    bn: 64,
    bk: 8,
    tm: 4,
    tn: 4,
    prefetch: true,
};

/// A tile override for tuning (`None`: choose by size).
pub(crate) static OVERRIDE: Mutex<Option<MatmulTiles>> = Mutex::new(None);

fn aligned(vals: &[usize]) -> bool {
    vals.iter().all(|v| v.is_multiple_of(4))
}

pub(crate) fn matmul(
    ctx: &Context,
    a: (&Arc<Pooled>, &Layout),
    b: (&Arc<Pooled>, &Layout),
) -> Arc<Pooled> {
    let (la, lb) = (a.1, b.1);
    let (batch, m, k, n) = (la.dims[0], la.dims[1], la.dims[2], lb.dims[2]);
    let out = alloc(ctx, batch * m * n * 4);
    if batch * m * n == 0 {
        return out;
    }
    // A batch of one has no batch stride to respect.
    let sb = |l: &Layout| if batch == 1 { 0 } else { l.strides[0] };
    let (a_sb, a_sm, a_sk) = (sb(la), la.strides[1], la.strides[2]);
    let (b_sb, b_sk, b_sn) = (sb(lb), lb.strides[1], lb.strides[2]);
    let a_load = if a_sk == 1 && aligned(&[k, la.offset, a_sb, a_sm]) {
        Load::K4
    } else if a_sm == 1 && aligned(&[m, la.offset, a_sb, a_sk]) {
        Load::Outer4
    } else if a_sk == 1 {
        Load::ScalarK
    } else {
        Load::ScalarOuter
    };
    let b_load = if b_sn == 1 && aligned(&[n, lb.offset, b_sb, b_sk]) {
        Load::Outer4
    } else if b_sk == 1 && aligned(&[k, lb.offset, b_sb, b_sn]) {
        Load::K4
    } else if b_sk == 1 {
        Load::ScalarK
    } else {
        Load::ScalarOuter
    };
    let tiles = OVERRIDE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or_else(|| {
            let large_tiles = m.div_ceil(128) * n.div_ceil(128) * batch;
            if m < 256 || n < 256 {
                SMALL
            } else if large_tiles < 256 {
                MEDIUM
            } else {
                LARGE
            }
        });
    let v = Variant {
        tiles,
        a: a_load,
        b: b_load,
        c_vec: n.is_multiple_of(4),
    };
    let key = vec![
        tiles.bm,
        tiles.bn,
        tiles.bk,
        tiles.tm,
        tiles.tn,
        u32::from(tiles.prefetch),
        a_load as u32,
        b_load as u32,
        u32::from(v.c_vec),
    ];
    let kern = kernel(
        ctx,
        super::pipelines::Key::Named("volta matmul", key),
        Bindings {
            reads: 2,
            writes: 1,
        },
        "main",
        || source(&v),
    );
    let p = [
        u(m),
        u(n),
        u(k),
        u(la.offset),
        u(a_sb),
        u(a_sm),
        u(a_sk),
        u(lb.offset),
        u(b_sb),
        u(b_sk),
        u(b_sn),
    ];
    let max = ctx.limits.max_compute_workgroups_per_dimension as usize;
    assert!(
        batch <= max,
        "GPU matmul: a batch of {batch} exceeds the grid limit {max}"
    );
    let groups = [
        u(n.div_ceil(tiles.bn as usize)),
        u(m.div_ceil(tiles.bm as usize)),
        u(batch),
    ];
    launch(ctx, &kern, &p, &[a.0, b.0, &out], groups);
    out
}
