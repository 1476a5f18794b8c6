//! Submission off the recording thread. wgpu-core does most of its work for a
//! batch when the encoder is finished (validation, usage tracking, barriers, the
//! driver's commands): about a microsecond per dispatch, more than Volta spends
//! recording one. The recorder hands batches to the submitting thread, which
//! writes their parameters, finishes and submits them while the program records
//! the next, as a CUDA launch returns before the driver has done its part. (When
//! a batch goes is the recorder's choice: full, or early to keep the GPU fed.)
//!
//! Order: one thread submits handed-over batches in the order they came, and the
//! recorder hands over and submits only under its lock. A sync point first waits
//! until every handed-over batch is submitted, then submits its own batch on the
//! calling thread (no wake-up on the read-back path), so the queue sees batches,
//! and the parameter writes before each, exactly in recording order.
//!
//! This is the runtime's one seam for submission, with two strategies
//! ([`Submission`]): the submitting thread, and inline submission by the
//! recording thread for targets without threads (wasm32 in a browser), which is
//! also what happens when the thread cannot be spawned or has stopped.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

/// How finished batches reach the GPU's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Submission {
    /// A thread of the runtime's own submits batches while the program records
    /// the next (the default where threads exist).
    Thread,
    /// The recording thread submits each batch itself when it is full or at a
    /// sync point (the default on wasm32, where nothing may block or spawn).
    Inline,
}

impl Submission {
    /// The target's default ([`Submission::Inline`] on wasm32, else
    /// [`Submission::Thread`]); the environment variable `VOLTA_SUBMIT`
    /// (`thread` or `inline`) overrides it.
    pub fn from_env() -> Submission {
        match std::env::var("VOLTA_SUBMIT").as_deref() {
            Ok("inline") => Submission::Inline,
            Ok("thread") => Submission::Thread,
            _ if cfg!(target_arch = "wasm32") => Submission::Inline,
            _ => Submission::Thread,
        }
    }
}

/// A finished recording: the buffer writes its kernels read, then its commands.
pub(crate) struct Batch {
    pub encoder: wgpu::CommandEncoder,
    pub writes: Vec<(wgpu::Buffer, Vec<u8>)>,
}

impl Batch {
    fn submit(self, queue: &wgpu::Queue) -> wgpu::SubmissionIndex {
        self.submit_then(queue, None)
    }

    /// Submits the batch, followed in the same submission by `then`.
    fn submit_then(
        self,
        queue: &wgpu::Queue,
        then: Option<wgpu::CommandBuffer>,
    ) -> wgpu::SubmissionIndex {
        for (buffer, bytes) in &self.writes {
            queue.write_buffer(buffer, 0, bytes);
        }
        queue.submit(std::iter::once(self.encoder.finish()).chain(then))
    }
}

/// What the submitting thread has done, for waiters.
#[derive(Default)]
struct Progress {
    /// Batches submitted by the thread so far.
    submitted: AtomicU64,
    /// Set when the thread ends (its channel closed, or wgpu panicked in it).
    stopped: AtomicBool,
    /// What wgpu panicked with, if it did: the batch and those behind it were
    /// not submitted, which the next sync point reports.
    panic: Mutex<Option<String>>,
    lock: Mutex<()>,
    changed: Condvar,
}

impl Progress {
    fn notify(&self) {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.changed.notify_all();
    }
}

pub(crate) struct Submitter {
    queue: wgpu::Queue,
    thread: Option<mpsc::Sender<Batch>>,
    handed: u64,
    progress: Arc<Progress>,
}

impl Submitter {
    pub fn new(queue: &wgpu::Queue, strategy: Submission) -> Self {
        let progress = Arc::new(Progress::default());
        if strategy == Submission::Inline {
            return Submitter {
                queue: queue.clone(),
                thread: None,
                handed: 0,
                progress,
            };
        }
        let (tx, rx) = mpsc::channel::<Batch>();
        let (worker_queue, worker_progress) = (queue.clone(), progress.clone());
        let thread = std::thread::Builder::new()
            .name("volta-submit".into())
            .spawn(move || {
                // Marks the thread stopped even if wgpu panics in it, so that
                // waiters return and later batches are submitted inline.
                struct Stopped(Arc<Progress>);
                impl Drop for Stopped {
                    fn drop(&mut self) {
                        self.0.stopped.store(true, Ordering::Release);
                        self.0.notify();
                    }
                }
                let _stopped = Stopped(worker_progress.clone());
                for batch in rx {
                    let submitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        batch.submit(&worker_queue)
                    }));
                    if let Err(panic) = submitted {
                        let message = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "a panic without a message".into());
                        *worker_progress
                            .panic
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = Some(message);
                        break;
                    }
                    worker_progress.submitted.fetch_add(1, Ordering::Release);
                    worker_progress.notify();
                }
            })
            .ok()
            .map(|_| tx);
        Submitter {
            queue: queue.clone(),
            thread,
            handed: 0,
            progress,
        }
    }

    /// How batches are submitted now ([`Submission::Inline`] also once the
    /// thread has stopped).
    pub fn strategy(&self) -> Submission {
        if self.thread.is_some() {
            Submission::Thread
        } else {
            Submission::Inline
        }
    }

    /// Whether every handed-over batch is submitted (the thread waits for work).
    pub fn idle(&self) -> bool {
        self.thread.is_some() && self.done()
    }

    fn done(&self) -> bool {
        self.progress.submitted.load(Ordering::Acquire) >= self.handed
            || self.progress.stopped.load(Ordering::Acquire)
    }

    /// Submits `batch` on the submitting thread; the caller goes on recording.
    pub fn hand_over(&mut self, batch: Batch) {
        let Some(tx) = &self.thread else {
            batch.submit(&self.queue);
            return;
        };
        match tx.send(batch) {
            Ok(()) => self.handed += 1,
            Err(mpsc::SendError(batch)) => {
                self.thread = None;
                self.wait();
                batch.submit(&self.queue);
            }
        }
    }

    /// Submits `batch` now, after every batch handed over before it.
    pub fn submit(&mut self, batch: Batch) -> wgpu::SubmissionIndex {
        self.wait();
        batch.submit(&self.queue)
    }

    /// Submits `batch` (if any) and then `commands`, finished earlier, now,
    /// after every batch handed over before them.
    pub fn submit_then(
        &mut self,
        batch: Option<Batch>,
        commands: wgpu::CommandBuffer,
    ) -> wgpu::SubmissionIndex {
        self.wait();
        match batch {
            Some(b) => b.submit_then(&self.queue, Some(commands)),
            None => self.queue.submit([commands]),
        }
    }

    /// Waits until every handed-over batch is submitted.
    pub fn wait(&self) {
        if self.done() {
            return;
        }
        let mut guard = self.progress.lock.lock().unwrap_or_else(|p| p.into_inner());
        while !self.done() {
            guard = self
                .progress
                .changed
                .wait(guard)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Once, after wgpu panicked on the submitting thread: what it said, and
    /// how many recorded batches were lost with it.
    pub fn take_failure(&mut self) -> Option<String> {
        let panic = self
            .progress
            .panic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        let lost = self.handed - self.progress.submitted.load(Ordering::Acquire);
        Some(format!(
            "wgpu panicked while submitting recorded work ({panic}); {lost} batch(es) \
             of kernels were not run, so values computed since the last sync point \
             are invalid"
        ))
    }
}
