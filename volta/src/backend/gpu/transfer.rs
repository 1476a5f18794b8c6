//! Moving data between host and device, and sync points.
use super::buffer::GpuBuffer;
use super::context::Context;
use super::elementwise::map;
use super::error::GpuError;
use super::launch::alloc;
use super::pool::Pooled;
use super::recorder::{flags, read_staging, stage};
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr};

/// Uploads host data into a new buffer. The copy is recorded in the current batch,
/// so no synchronisation happens here. The data is copied into a staging buffer
/// before the recorder is locked: a loader thread that uploads a batch holds the
/// lock only to record the copy, not while it writes the bytes.
pub(crate) fn upload<E: bytemuck::Pod>(ctx: &Context, data: &[E]) -> GpuBuffer<E> {
    let buf = alloc(ctx, std::mem::size_of_val(data));
    if !data.is_empty() {
        let staging = stage(ctx, bytemuck::cast_slice(data));
        ctx.recorder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .upload(ctx, &staging, &buf);
    }
    GpuBuffer::new(buf, data.len())
}

/// Reads a view back (a strided view is first made contiguous on the device).
pub(crate) fn download<E: bytemuck::Pod>(
    ctx: &Context,
    buf: &Arc<Pooled>,
    layout: &Layout,
    elem: Elem,
) -> Result<Vec<E>, GpuError> {
    let n = layout.numel();
    if n == 0 {
        return sync(ctx).map(|()| Vec::new());
    }
    let (src, offset) = if layout.is_contiguous() {
        (buf.clone(), layout.offset)
    } else {
        (
            map(
                ctx,
                elem,
                Expr::input(0),
                &[(buf, layout)],
                &[],
                &layout.dims,
            ),
            0,
        )
    };
    let bytes = read(ctx, &src, offset * 4, n * 4)?;
    Ok(bytes
        .chunks_exact(std::mem::size_of::<E>())
        .map(bytemuck::pod_read_unaligned)
        .collect())
}

/// Submits pending work, waits, and reports errors since the last sync point.
pub(crate) fn sync(ctx: &Context) -> Result<(), GpuError> {
    let flags = flags(ctx);
    read(ctx, &flags, 0, 0).map(|_| ())
}

fn read(
    ctx: &Context,
    src: &Arc<Pooled>,
    offset: usize,
    bytes: usize,
) -> Result<Vec<u8>, GpuError> {
    let staging = ctx
        .recorder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .copy_out(ctx, src, offset as u64, bytes as u64);
    read_staging(ctx, &staging, bytes as u64)
}
