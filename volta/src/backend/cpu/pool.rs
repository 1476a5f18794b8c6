//! Warm helper threads for the CPU's quantised GEMV. A decode step makes about a
//! hundred matmuls of a few hundred microseconds each; handing each to rayon and
//! sleeping until it is done costs a wake-up of the pool and of the caller per
//! call. Here the caller works on the chunks itself, helpers spin for a while
//! between calls (as llama.cpp's threads do, yielding the core to any other
//! thread that wants it) and take chunks as they come, and the caller waits only
//! for chunks a helper has started.
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle helper spins before it sleeps.
const SPIN: Duration = Duration::from_millis(2);

/// Computes chunk `c`'s values.
type Task = dyn Fn(usize) -> Vec<f32> + Send + Sync;

/// One call's chunks.
struct Job {
    task: Box<Task>,
    chunks: usize,
    next: AtomicUsize,
    /// Chunks taken by a helper and not yet finished.
    running: AtomicUsize,
    results: Mutex<Vec<(usize, Vec<f32>)>>,
    /// Whether a helper's chunk panicked (the caller then panics too).
    failed: AtomicBool,
}

impl Job {
    /// Takes and computes chunks until none is left; a helper's results go to
    /// `results`, the caller's to `own`.
    fn work(&self, mut own: Option<&mut Vec<(usize, Vec<f32>)>>) {
        loop {
            if own.is_none() {
                self.running.fetch_add(1, Ordering::AcqRel);
            }
            let c = self.next.fetch_add(1, Ordering::AcqRel);
            if c >= self.chunks {
                if own.is_none() {
                    self.running.fetch_sub(1, Ordering::AcqRel);
                }
                return;
            }
            let values = match own {
                Some(_) => (self.task)(c),
                // A helper's panic must not leave the caller waiting.
                None => match catch_unwind(AssertUnwindSafe(|| (self.task)(c))) {
                    Ok(values) => values,
                    Err(_) => {
                        self.failed.store(true, Ordering::Release);
                        self.running.fetch_sub(1, Ordering::AcqRel);
                        return;
                    }
                },
            };
            match own.as_deref_mut() {
                Some(own) => own.push((c, values)),
                None => {
                    self.results
                        .lock()
                        .expect("no panic while held")
                        .push((c, values));
                    self.running.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
    }
}

struct Pool {
    helpers: usize,
    current: Mutex<Option<Arc<Job>>>,
    generation: AtomicU64,
    sleeping: AtomicUsize,
    wake: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    static STARTED: std::sync::Once = std::sync::Once::new();
    let pool = POOL.get_or_init(|| Pool {
        helpers: rayon::current_num_threads().saturating_sub(1),
        current: Mutex::new(None),
        generation: AtomicU64::new(0),
        sleeping: AtomicUsize::new(0),
        wake: Condvar::new(),
    });
    STARTED.call_once(|| {
        for i in 0..pool.helpers {
            std::thread::Builder::new()
                .name(format!("volta-gemv-{i}"))
                .spawn(move || helper(pool))
                .expect("a helper thread");
        }
    });
    pool
}

fn helper(pool: &'static Pool) {
    let mut seen = 0;
    loop {
        let start = Instant::now();
        while pool.generation.load(Ordering::Acquire) == seen {
            if start.elapsed() > SPIN {
                let mut current = pool.current.lock().expect("no panic while held");
                pool.sleeping.fetch_add(1, Ordering::AcqRel);
                while pool.generation.load(Ordering::Acquire) == seen {
                    current = pool.wake.wait(current).expect("no panic while held");
                }
                pool.sleeping.fetch_sub(1, Ordering::AcqRel);
                break;
            }
            // Yielding, not spinning: on a busy machine the caller may be
            // waiting for this core.
            std::thread::yield_now();
        }
        seen = pool.generation.load(Ordering::Acquire);
        let job = pool.current.lock().expect("no panic while held").clone();
        if let Some(job) = job {
            job.work(None);
        }
    }
}

/// `task(c)` for `c` in `0..chunks`, on this thread and the warm helpers; the
/// results in chunk order. Small jobs (`parallel` false) stay on this thread.
pub(crate) fn run(chunks: usize, parallel: bool, task: Box<Task>) -> Vec<Vec<f32>> {
    let pool = pool();
    if !parallel || pool.helpers == 0 || chunks < 2 {
        return (0..chunks).map(task).collect();
    }
    let job = Arc::new(Job {
        task,
        chunks,
        next: AtomicUsize::new(0),
        running: AtomicUsize::new(0),
        results: Mutex::new(Vec::new()),
        failed: AtomicBool::new(false),
    });
    {
        let mut current = pool.current.lock().expect("no panic while held");
        *current = Some(job.clone());
        pool.generation.fetch_add(1, Ordering::AcqRel);
        if pool.sleeping.load(Ordering::Acquire) > 0 {
            pool.wake.notify_all();
        }
    }
    let mut own = Vec::with_capacity(chunks);
    job.work(Some(&mut own));
    // Every chunk is taken; wait for those a helper is still computing.
    while job.running.load(Ordering::Acquire) > 0 {
        std::thread::yield_now();
    }
    assert!(
        !job.failed.load(Ordering::Acquire),
        "a GEMV helper thread panicked"
    );
    own.append(&mut job.results.lock().expect("no panic while held"));
    own.sort_unstable_by_key(|r| r.0);
    own.into_iter().map(|r| r.1).collect()
}
