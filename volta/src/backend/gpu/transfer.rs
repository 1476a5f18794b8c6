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
    // On a lost device the data goes nowhere; the next sync point says why.
    if !data.is_empty() && ctx.check_lost().is_ok() {
        // Copies move whole 4-byte words: an odd number of f16s is padded.
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let padded;
        let bytes = if bytes.len().is_multiple_of(4) {
            bytes
        } else {
            padded = [bytes, &[0; 3][..4 - bytes.len() % 4]].concat();
            &padded[..]
        };
        let staging = stage(ctx, bytes);
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
    // Copies move whole 4-byte words: read the words that hold the elements (the
    // buffer's size is a multiple of 4, so they exist) and drop the extra ones.
    let size = elem.size();
    debug_assert_eq!(size, std::mem::size_of::<E>());
    let (start, end) = (offset * size, (offset + n) * size);
    let word = start - start % 4;
    let bytes = read(ctx, &src, word, end.next_multiple_of(4) - word)?;
    Ok(bytes[start - word..end - word]
        .chunks_exact(size)
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
    // A lost device may never call back: answer before waiting on it.
    ctx.check_lost()?;
    let staging = ctx
        .recorder
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .copy_out(ctx, src, offset as u64, bytes as u64);
    read_staging(ctx, &staging, bytes as u64)
}
