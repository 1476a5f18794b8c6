//! Moving bytes between host and device, and sync points. Uploads are recorded
//! in the current batch (no synchronisation); a read-back submits what is
//! recorded and waits for it, and reports what went wrong since the last sync.
use super::Runtime;
use super::error::GpuError;
use super::launch::alloc;
use super::pool::Pooled;
use std::sync::Arc;

/// Uploads host data into a new buffer. The copy is recorded in the current batch,
/// so no synchronisation happens here. The data is copied into a staging buffer
/// before the recorder is locked: a loader thread that uploads a batch holds the
/// lock only to record the copy, not while it writes the bytes.
pub(crate) fn upload<E: bytemuck::Pod>(rt: &Runtime, data: &[E]) -> Arc<Pooled> {
    let buf = alloc(rt, std::mem::size_of_val(data));
    // On a lost device the data goes nowhere; the next sync point says why.
    if !data.is_empty() && rt.gpu.check_lost().is_ok() {
        // Copies move whole 4-byte words: an odd number of f16s is padded.
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let padded;
        let bytes = if bytes.len().is_multiple_of(4) {
            bytes
        } else {
            padded = [bytes, &[0; 3][..4 - bytes.len() % 4]].concat();
            &padded[..]
        };
        let staging = stage(rt, bytes);
        rt.recorder().upload(&rt.gpu, &staging, &buf);
    }
    buf
}

/// Reads `n` contiguous elements of `size` bytes from element `offset` of `buf`.
pub(crate) fn download<E: bytemuck::Pod>(
    rt: &Runtime,
    buf: &Arc<Pooled>,
    offset: usize,
    n: usize,
) -> Result<Vec<E>, GpuError> {
    if n == 0 {
        return sync(rt).map(|()| Vec::new());
    }
    // Copies move whole 4-byte words: read the words that hold the elements (the
    // buffer's size is a multiple of 4, so they exist) and drop the extra ones.
    let size = std::mem::size_of::<E>();
    let (start, end) = (offset * size, (offset + n) * size);
    let word = start - start % 4;
    let bytes = read(rt, buf, word, end.next_multiple_of(4) - word)?;
    Ok(bytes[start - word..end - word]
        .chunks_exact(size)
        .map(bytemuck::pod_read_unaligned)
        .collect())
}

/// Submits pending work, waits, and reports errors since the last sync point.
pub(crate) fn sync(rt: &Runtime) -> Result<(), GpuError> {
    let flags = flags(rt);
    read(rt, &flags, 0, 0).map(|_| ())
}

/// The error-flags buffer, for kernels that raise flags and for sync points.
pub(crate) fn flags(rt: &Runtime) -> Arc<Pooled> {
    rt.recorder().flags.clone()
}

fn read(rt: &Runtime, src: &Arc<Pooled>, offset: usize, bytes: usize) -> Result<Vec<u8>, GpuError> {
    // A lost device may never call back: answer before waiting on it.
    rt.gpu.check_lost()?;
    let staging = rt
        .recorder()
        .copy_out(&rt.gpu, &rt.pool, src, offset as u64, bytes as u64);
    read_staging(rt, &staging, bytes as u64)
}

/// A staging buffer holding `data` (not empty), for [`Recorder::upload`]. It needs
/// no lock, so a loader thread fills it while other threads record kernels.
///
/// [`Recorder::upload`]: super::recorder::Recorder::upload
pub(crate) fn stage(rt: &Runtime, data: &[u8]) -> wgpu::Buffer {
    let staging = rt.gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("volta upload"),
        size: data.len() as u64,
        usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: true,
    });
    staging
        .slice(..)
        .get_mapped_range_mut()
        .expect("a buffer mapped at creation")
        .copy_from_slice(data);
    staging.unmap();
    staging
}

/// Maps a staging buffer written by `Recorder::copy_out` (waiting for the GPU),
/// and returns its first `bytes` bytes; reports kernel error flags and any pending
/// asynchronous error.
fn read_staging(rt: &Runtime, staging: &Pooled, bytes: u64) -> Result<Vec<u8>, GpuError> {
    let slice = staging.buffer.slice(..bytes + 16);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    let mapped = rt.gpu.wait_for_map(&rx)?;
    if let Err(e) = rt.gpu.take_error() {
        // The staging buffer goes back to the pool: unmapped, or the next submit
        // that uses it fails.
        if mapped.is_ok() {
            staging.buffer.unmap();
        }
        return Err(e);
    }
    mapped.map_err(|e| GpuError::ReadBack(e.to_string()))?;
    let data = {
        let view = slice
            .get_mapped_range()
            .map_err(|e| GpuError::ReadBack(e.to_string()))?;
        view.to_vec()
    };
    staging.buffer.unmap();
    let raised: [u32; 4] = bytemuck::pod_read_unaligned(&data[bytes as usize..]);
    if raised.iter().any(|&f| f != 0) {
        rt.gpu.queue.write_buffer(&flags(rt).buffer, 0, &[0; 16]);
        return Err(GpuError::IndexOutOfRange);
    }
    let mut data = data;
    data.truncate(bytes as usize);
    Ok(data)
}
