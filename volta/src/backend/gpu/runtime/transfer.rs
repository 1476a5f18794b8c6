//! Moving bytes between host and device, and sync points. Uploads are recorded
//! in the current batch (no synchronisation); a read-back submits what is
//! recorded and waits for it, and reports what went wrong since the last sync.
//! Each read-back has a blocking form and an `_async` one (the browser's): both
//! record the same copy and finish alike; only the wait differs.
use super::Runtime;
use super::device::Callback;
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
        // Large uploads go in pieces: a staging buffer past the allocator's
        // block size is a dedicated allocation of fresh memory each time, which
        // costs more than the copy (43 MB: 42 ms on an H200 VM, 2026-11-26).
        for (i, piece) in bytes.chunks(STAGING_PIECE).enumerate() {
            let staging = stage(rt, piece);
            rt.recorder()
                .upload(&rt.gpu, &staging, &buf, (i * STAGING_PIECE) as u64);
        }
    }
    buf
}

/// The largest staging buffer of one upload (a multiple of 4 bytes).
const STAGING_PIECE: usize = 4 << 20;

/// Reads `n` contiguous elements of `size` bytes from element `offset` of `buf`.
pub(crate) fn download<E: bytemuck::Pod>(
    rt: &Runtime,
    buf: &Arc<Pooled>,
    offset: usize,
    n: usize,
) -> Result<Vec<E>, GpuError> {
    let mut out = Vec::new();
    download_into(rt, buf, offset, n, &mut out)?;
    Ok(out)
}

/// [`download`] into `out`, reusing its allocation.
pub(crate) fn download_into<E: bytemuck::Pod>(
    rt: &Runtime,
    buf: &Arc<Pooled>,
    offset: usize,
    n: usize,
    out: &mut Vec<E>,
) -> Result<(), GpuError> {
    // Answered before anything is recorded: in the browser the wait never ends.
    if cfg!(target_arch = "wasm32") {
        return Err(GpuError::WouldBlock);
    }
    let read = Read::start(rt, buf, offset, n, size_of::<E>())?;
    let mapped = rt.gpu.wait_for(&read.done, read.submission.clone())?;
    read.finish_into(rt, mapped, out)
}

/// [`download`] without blocking: the copy is recorded and submitted now; the
/// future waits for it.
pub(crate) async fn download_async<E: bytemuck::Pod>(
    rt: &Runtime,
    buf: &Arc<Pooled>,
    offset: usize,
    n: usize,
) -> Result<Vec<E>, GpuError> {
    let read = Read::start(rt, buf, offset, n, size_of::<E>())?;
    let mapped = rt.gpu.callback(&read.done, read.submission.clone()).await?;
    let mut out = Vec::new();
    read.finish_into(rt, mapped, &mut out)?;
    Ok(out)
}

/// A read-back whose copy is recorded and submitted, to be finished later,
/// possibly on another thread.
pub(crate) struct Reading {
    rt: &'static Runtime,
    read: Read,
}

impl Reading {
    /// Records and submits the copy of `n` elements from element `offset` of `buf`.
    pub(crate) fn start<E: bytemuck::Pod>(
        rt: &'static Runtime,
        buf: &Arc<Pooled>,
        offset: usize,
        n: usize,
    ) -> Result<Reading, GpuError> {
        let read = Read::start(rt, buf, offset, n, size_of::<E>())?;
        Ok(Reading { rt, read })
    }

    /// Waits for the copy and fills `out` (replacing its contents).
    pub(crate) async fn finish<E: bytemuck::Pod>(
        self,
        mut out: Vec<E>,
    ) -> Result<Vec<E>, GpuError> {
        let Reading { rt, read } = self;
        let mapped = rt.gpu.callback(&read.done, read.submission.clone()).await?;
        read.finish_into(rt, mapped, &mut out)?;
        Ok(out)
    }
}

/// Submits pending work, waits, and reports errors since the last sync point.
pub(crate) fn sync(rt: &Runtime) -> Result<(), GpuError> {
    download::<u32>(rt, &flags(rt), 0, 0).map(|_| ())
}

/// [`sync`] without blocking.
pub(crate) async fn sync_async(rt: &Runtime) -> Result<(), GpuError> {
    download_async::<u32>(rt, &flags(rt), 0, 0)
        .await
        .map(|_| ())
}

/// The error-flags buffer, for kernels that raise flags and for sync points.
pub(crate) fn flags(rt: &Runtime) -> Arc<Pooled> {
    rt.recorder().flags.clone()
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

impl Drop for Read {
    /// The staging buffer goes back to the pool unmapped, or the next submit that
    /// uses it fails: on an error, or when an awaiting task was dropped while the
    /// mapping was pending (unmapping cancels it).
    fn drop(&mut self) {
        if !self.finished {
            self.staging.buffer.unmap();
        }
    }
}

/// A read-back in flight: the staging copy of the words that hold the elements
/// (copies move whole 4-byte words), being mapped.
struct Read {
    staging: Pooled,
    /// The submission that holds the copy.
    submission: Option<wgpu::SubmissionIndex>,
    done: Arc<Callback>,
    /// Whether `finish` unmapped the staging buffer (else `drop` does).
    finished: bool,
    /// Bytes copied (whole words), and where the elements lie among them.
    bytes: u64,
    elements: std::ops::Range<usize>,
    size: usize,
}

impl Read {
    /// Records the copy of `n` elements of `size` bytes from element `offset` of
    /// `src` (with the kernels' error flags behind it), submits it and starts
    /// mapping the staging buffer. A lost device may never call back: that is
    /// answered before anything is recorded.
    fn start(
        rt: &Runtime,
        src: &Arc<Pooled>,
        offset: usize,
        n: usize,
        size: usize,
    ) -> Result<Read, GpuError> {
        rt.gpu.check_lost()?;
        // Nothing to read: a sync point, which reads only the flags.
        let (start, end) = if n == 0 {
            (0, 0)
        } else {
            (offset * size, (offset + n) * size)
        };
        let word = start - start % 4;
        let bytes = (end.next_multiple_of(4) - word) as u64;
        let (staging, submission) =
            rt.recorder()
                .copy_out(&rt.gpu, &rt.pool, src, word as u64, bytes);
        let done = Arc::new(Callback::default());
        staging
            .buffer
            .slice(..bytes + 16)
            .map_async(wgpu::MapMode::Read, done.sender());
        Ok(Read {
            staging,
            submission,
            done,
            finished: false,
            bytes,
            elements: start - word..end - word,
            size,
        })
    }

    /// The elements into `out`, once mapped; reports kernel error flags and any
    /// pending asynchronous error.
    fn finish_into<E: bytemuck::Pod>(
        mut self,
        rt: &Runtime,
        mapped: Result<(), wgpu::BufferAsyncError>,
        out: &mut Vec<E>,
    ) -> Result<(), GpuError> {
        if mapped.is_err() {
            // Nothing is mapped, so nothing to unmap.
            self.finished = true;
        }
        rt.gpu.take_error()?;
        mapped.map_err(|e| GpuError::ReadBack(e.to_string()))?;
        let buffer = &self.staging.buffer;
        let raised = {
            let view = buffer
                .slice(..self.bytes + 16)
                .get_mapped_range()
                .map_err(|e| GpuError::ReadBack(e.to_string()))?;
            let raised: [u32; 4] = bytemuck::pod_read_unaligned(&view[self.bytes as usize..]);
            let bytes = &view[self.elements.clone()];
            // One memcpy when the elements are aligned (mapped ranges are), else
            // element by element.
            match bytemuck::try_cast_slice::<u8, E>(bytes) {
                Ok(elements) if out.len() == elements.len() => {
                    copy_parallel(bytemuck::cast_slice_mut(out), bytes);
                }
                Ok(elements) => {
                    out.clear();
                    out.extend_from_slice(elements);
                }
                Err(_) => {
                    out.clear();
                    out.extend(
                        bytes
                            .chunks_exact(self.size)
                            .map(bytemuck::pod_read_unaligned::<E>),
                    );
                }
            }
            raised
        };
        buffer.unmap();
        self.finished = true;
        if raised.iter().any(|&f| f != 0) {
            rt.gpu.queue.write_buffer(&flags(rt).buffer, 0, &[0; 16]);
            return Err(GpuError::IndexOutOfRange);
        }
        Ok(())
    }
}

/// `src` into `dst` (a vector read into again, of the same length), in pieces
/// on several threads when it is large: one thread's copy out of the mapped
/// staging memory takes longer than the transfer that filled it (H100 host,
/// 2026-11-27: 12.6 MB of logits read back in 1.26–1.32 ms, in pieces
/// 0.79–0.89; 3.1 MB in 0.38–0.40 ms on one thread, 0.47–0.54 in pieces).
fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 20;
    // The browser's thread is the only one.
    if src.len() <= 4 * PIECE || cfg!(target_arch = "wasm32") {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}
