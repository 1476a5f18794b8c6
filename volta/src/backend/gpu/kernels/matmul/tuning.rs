//! Matmul tiles tuned on the adapter at first use, the winners kept on disk.
//!
//! The first product of a class (its sizes rounded up to powers of two, batched
//! or not, how each operand loads, its element types) times every tile candidate
//! that fits the adapter on that product's own operands and keeps the fastest; the
//! size-based choice is among the candidates, so tuning never keeps a slower one.
//! Timing waits for the GPU once per class (the first training step, like cuDNN's
//! benchmark mode) without taking the error a sync point would report.
//!
//! Winners are written to one file per adapter, driver and backend (see
//! [`cache_dir`]), and read at the first product, so later processes skip tuning.
//! A file that does not parse is ignored with one warning and rewritten; a
//! directory that cannot be written costs only the cache.
use super::tiled::{MatmulTiles, Staging};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::device::GpuInfo;
use crate::backend::gpu::runtime::hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// What a tuned choice holds for: every product of the class shares its tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Class {
    /// m, k and n rounded up to powers of two.
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub batched: bool,
    /// How A and B load (`tiled::Load` as a number).
    pub a_load: u32,
    pub b_load: u32,
    /// `f16` operands, an `f16` result.
    pub half: bool,
    pub half_out: bool,
}

impl Class {
    pub fn new(
        (batch, m, k, n): (usize, usize, usize, usize),
        (a_load, b_load): (u32, u32),
        (half, half_out): (bool, bool),
    ) -> Class {
        Class {
            m: m.next_power_of_two(),
            k: k.next_power_of_two(),
            n: n.next_power_of_two(),
            batched: batch > 1,
            a_load,
            b_load,
            half,
            half_out,
        }
    }
}

/// Bumped when the file's lines or the candidates' meaning change.
const FORMAT: &str = "volta-matmul-tuning 2";
/// The first line of every version of the format: a file of another version was
/// tuned over other candidates, and is tuned again and replaced without a warning.
const FORMAT_FAMILY: &str = "volta-matmul-tuning ";

/// Tuned tiles: those found or read so far, and where they are kept.
pub(crate) struct Tuning {
    enabled: AtomicBool,
    state: Mutex<State>,
    tuned: AtomicU64,
}

#[derive(Default)]
struct State {
    winners: FxHashMap<Class, MatmulTiles>,
    /// The cache file; `None` until first use, then `Some(None)` without one.
    file: Option<Option<PathBuf>>,
    warned: bool,
}

impl Tuning {
    /// On by default for GPUs, off for CPU adapters (a software rasterizer gains
    /// little and tests would pay the timing) and in the browser (timing blocks);
    /// `VOLTA_AUTOTUNE=0/1` decides first.
    pub fn new(info: &GpuInfo) -> Tuning {
        let enabled = match std::env::var("VOLTA_AUTOTUNE").as_deref() {
            _ if cfg!(target_arch = "wasm32") => false,
            Ok("0") => false,
            Ok("1") => true,
            _ => info.device_type != format!("{:?}", wgpu::DeviceType::Cpu),
        };
        Tuning {
            enabled: AtomicBool::new(enabled),
            state: Mutex::new(State::default()),
            tuned: AtomicU64::new(0),
        }
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Classes tuned by timing in this process (not read from the cache).
    pub fn tuned(&self) -> u64 {
        self.tuned.load(Ordering::Relaxed)
    }

    /// The tiles for `class`: the winner found or cached, or, the first time,
    /// the fastest of `candidates` when each is run by `run` (which records one
    /// launch of the product with the given tiles). `prepare` compiles a
    /// candidate's kernel: all of them are compiled first, in parallel (compiling
    /// one after another was most of a cold start's time: 4.3 s of a language
    /// model's 5.6 s to its first token on an H100). `fallback` when tuning is off
    /// or cannot time (capturing, profiling).
    pub fn tiles<K>(
        &self,
        rt: &Runtime,
        class: Class,
        fallback: MatmulTiles,
        prepare: &(dyn Fn(MatmulTiles) -> K + Sync),
        run: &dyn Fn(MatmulTiles),
    ) -> MatmulTiles {
        if !self.enabled() {
            return fallback;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.file.is_none() {
            let file = cache_file(&rt.gpu.info);
            if let Some(path) = &file {
                state.load(path);
            }
            state.file = Some(file);
        }
        if let Some(&t) = state.winners.get(&class) {
            return t;
        }
        {
            let recorder = rt.recorder();
            if recorder.profiler.is_some() || recorder.capture.is_some() {
                return fallback;
            }
        }
        let max_shared = rt.gpu.limits.max_compute_workgroup_storage_size;
        let max_threads = rt.gpu.limits.max_compute_invocations_per_workgroup;
        let mut best = (f64::INFINITY, fallback);
        let candidates: Vec<MatmulTiles> = std::iter::once(fallback)
            .chain(
                MatmulTiles::CANDIDATES
                    .into_iter()
                    .filter(|t| *t != fallback && t.check(max_threads, max_shared).is_ok()),
            )
            .collect();
        compile_all(&candidates, prepare);
        let Some(seconds) = time(rt, &candidates, run) else {
            // The device is lost or failing: keep the size-based choice, do
            // not cache it.
            return fallback;
        };
        for (&tiles, &s) in candidates.iter().zip(&seconds) {
            if s < best.0 {
                best = (s, tiles);
            }
        }
        self.tuned.fetch_add(1, Ordering::Relaxed);
        state.winners.insert(class, best.1);
        if let Some(Some(path)) = state.file.clone() {
            state.save(&path);
        }
        best.1
    }
}

/// Runs `prepare` on every candidate, on as many threads as the host has cores
/// (the pipeline cache compiles outside its lock; the driver compiles pipelines
/// concurrently). One after another where threads cannot start (the browser).
fn compile_all<K>(candidates: &[MatmulTiles], prepare: &(dyn Fn(MatmulTiles) -> K + Sync)) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cfg!(target_arch = "wasm32") || threads < 2 {
        for &t in candidates {
            prepare(t);
        }
        return;
    }
    let per = candidates.len().div_ceil(threads);
    std::thread::scope(|s| {
        for chunk in candidates.chunks(per.max(1)) {
            s.spawn(move || {
                for &t in chunk {
                    prepare(t);
                }
            });
        }
    });
}

/// Seconds per launch of each candidate's product on the GPU (`run` records one
/// launch): a warm-up each, then the best of three rounds that time every
/// candidate in turn, a batch of launches sized to last about a millisecond.
/// Rounds rather than one candidate after another: the GPU's clock can still be
/// rising at a process's first products, and timed one after another the first
/// candidates (the size-based choice first) ran at a lower clock than the last
/// (H200, 2026-12-04). `None` when waiting fails.
fn time(rt: &Runtime, candidates: &[MatmulTiles], run: &dyn Fn(MatmulTiles)) -> Option<Vec<f64>> {
    let batch = |tiles: MatmulTiles, n: usize| -> Option<f64> {
        let start = Instant::now();
        for _ in 0..n {
            run(tiles);
        }
        wait(rt)?;
        Some(start.elapsed().as_secs_f64() / n as f64)
    };
    wait(rt)?; // earlier work, not this product's
    // One launch each compiles the pipeline and warms the caches, and sizes
    // its batches.
    let mut sized = Vec::with_capacity(candidates.len());
    for &tiles in candidates {
        let once = batch(tiles, 1)?;
        sized.push(((1e-3 / once.max(1e-7)) as usize).clamp(1, 64));
    }
    let mut best = vec![f64::INFINITY; candidates.len()];
    for _ in 0..3 {
        for ((&tiles, &n), best) in candidates.iter().zip(&sized).zip(&mut best) {
            *best = best.min(batch(tiles, n)?);
        }
    }
    Some(best)
}

/// Submits what is recorded and waits for the GPU, leaving any error for the
/// next sync point.
fn wait(rt: &Runtime) -> Option<()> {
    if rt.gpu.check_lost().is_err() {
        return None;
    }
    {
        let mut recorder = rt.recorder();
        recorder.flush(&rt.gpu);
        recorder.waits += 1;
    }
    rt.gpu
        .device
        .poll(wgpu::PollType::wait_indefinitely())
        .ok()
        .map(|_| ())
}

/// The directory of tuning caches: `$VOLTA_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/volta`, else `$HOME/.cache/volta`.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("VOLTA_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("volta")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("volta")))
}

/// This adapter's cache file: its name, driver and backend, made a file name.
fn cache_file(info: &GpuInfo) -> Option<PathBuf> {
    let name: String = format!("{}-{}-{}", info.name, info.driver, info.backend)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Some(cache_dir()?.join(format!("matmul-{name}.txt")))
}

impl State {
    fn load(&mut self, path: &Path) {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => return self.warn(path, &e.to_string()),
        };
        let first = text.lines().next().unwrap_or_default();
        if first != FORMAT && first.starts_with(FORMAT_FAMILY) {
            return;
        }
        match parse(&text) {
            Ok(winners) => self.winners.extend(winners),
            Err(e) => self.warn(path, &e),
        }
    }

    fn save(&mut self, path: &Path) {
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                // Whole or not at all: a temporary file, then a rename.
                let tmp = path.with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(&tmp, render(&self.winners))?;
                std::fs::rename(&tmp, path)
            });
        if let Err(e) = written {
            self.warn(path, &format!("cannot write it: {e}"));
        }
    }

    fn warn(&mut self, path: &Path, why: &str) {
        if !self.warned {
            self.warned = true;
            eprintln!(
                "volta: matmul tuning cache {}: {why}; tuning again (set VOLTA_CACHE_DIR \
                 to move it, VOLTA_AUTOTUNE=0 to turn tuning off)",
                path.display()
            );
        }
    }
}

/// The file's text: the format line, then one line per class,
/// `m k n batched a_load b_load half half_out = bm bn bk tm tn staging warp_cols`.
pub(crate) fn render(winners: &FxHashMap<Class, MatmulTiles>) -> String {
    let mut lines: Vec<String> = winners
        .iter()
        .map(|(c, t)| {
            format!(
                "{} {} {} {} {} {} {} {} = {} {} {} {} {} {} {}",
                c.m,
                c.k,
                c.n,
                u8::from(c.batched),
                c.a_load,
                c.b_load,
                u8::from(c.half),
                u8::from(c.half_out),
                t.bm,
                t.bn,
                t.bk,
                t.tm,
                t.tn,
                t.staging as u32,
                t.warp_cols
            )
        })
        .collect();
    lines.sort();
    format!("{FORMAT}\n{}\n", lines.join("\n"))
}

/// The winners in a file's text; an error names the first line that does not
/// parse, or a tile that is not one of the candidates.
pub(crate) fn parse(text: &str) -> Result<FxHashMap<Class, MatmulTiles>, String> {
    let mut lines = text.lines();
    if lines.next() != Some(FORMAT) {
        return Err(format!("not a `{FORMAT}` file"));
    }
    let mut winners = FxHashMap::default();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = || format!("line {} does not parse: `{line}`", i + 2);
        let (class, tiles) = line.split_once('=').ok_or_else(bad)?;
        let nums = |s: &str| -> Result<Vec<usize>, String> {
            s.split_whitespace()
                .map(|w| w.parse().map_err(|_| bad()))
                .collect()
        };
        let (c, t) = (nums(class)?, nums(tiles)?);
        let [m, k, n, batched, a_load, b_load, half, half_out]: [usize; 8] =
            c[..].try_into().map_err(|_| bad())?;
        let [bm, bn, bk, tm, tn, staging, warp_cols]: [usize; 7] =
            t[..].try_into().map_err(|_| bad())?;
        let staging = [Staging::Direct, Staging::Prefetch, Staging::Double]
            .into_iter()
            .find(|s| *s as usize == staging)
            .ok_or_else(bad)?;
        let tiles = MatmulTiles {
            bm: bm as u32,
            bn: bn as u32,
            bk: bk as u32,
            tm: tm as u32,
            tn: tn as u32,
            staging,
            warp_cols: warp_cols as u32,
        };
        if !MatmulTiles::CANDIDATES.contains(&tiles) {
            return Err(format!("line {}: {tiles:?} is not a candidate", i + 2));
        }
        let flag = |v: usize| v != 0;
        let class = Class {
            m,
            k,
            n,
            batched: flag(batched),
            a_load: a_load as u32,
            b_load: b_load as u32,
            half: flag(half),
            half_out: flag(half_out),
        };
        winners.insert(class, tiles);
    }
    Ok(winners)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(m: usize) -> Class {
        Class::new((1, m, 300, 64), (1, 0), (false, false))
    }

    #[test]
    fn classes_round_sizes_up_to_powers_of_two() {
        assert_eq!(class(100), class(128));
        assert_ne!(class(100), class(129));
        assert_eq!(class(100).k, 512);
    }

    #[test]
    fn the_file_round_trips() {
        let mut winners = FxHashMap::default();
        winners.insert(class(100), MatmulTiles::CANDIDATES[3]);
        winners.insert(class(1000), MatmulTiles::CANDIDATES[13]);
        let text = render(&winners);
        assert!(text.starts_with("volta-matmul-tuning 2\n"), "{text}");
        assert_eq!(parse(&text).unwrap(), winners);
    }

    #[test]
    fn a_corrupt_file_is_ignored_then_rewritten() {
        let dir = std::env::temp_dir().join(format!("volta-tuning-{}", std::process::id()));
        let path = dir.join("matmul-test.txt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&path, "garbage\n").unwrap();
        let mut state = State::default();
        state.load(&path);
        assert!(state.warned && state.winners.is_empty());
        state.winners.insert(class(100), MatmulTiles::CANDIDATES[0]);
        state.save(&path);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(parse(&text).unwrap(), state.winners);
        // A file of another version of the format: tuned again, no warning.
        std::fs::write(
            dir.join("old.txt"),
            "volta-matmul-tuning 1\n1 2 3 0 1 0 0 0 = 64 64 8 4 4 1\n",
        )
        .unwrap();
        let mut old = State::default();
        old.load(&dir.join("old.txt"));
        assert!(!old.warned && old.winners.is_empty());
        // Read back by a new process's state.
        let mut again = State::default();
        again.load(&path);
        assert!(!again.warned);
        assert_eq!(again.winners, state.winners);
        // A directory that cannot be made: a warning, no panic.
        let blocked = path.join("below-a-file.txt");
        let mut state = State::default();
        state.save(&blocked);
        assert!(state.warned);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_file_is_refused_with_the_line() {
        assert!(parse("").unwrap_err().contains("not a"));
        assert!(
            parse("volta-matmul-tuning 0\n")
                .unwrap_err()
                .contains("not a")
        );
        let head = "volta-matmul-tuning 2\n";
        let err = parse(&format!("{head}128 512 64 0 1 0 0 0 = 64 64\n")).unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        let err = parse(&format!("{head}\n128 x 64 0 1 0 0 0 = 64 64 8 4 4 1 0\n")).unwrap_err();
        assert!(err.contains("line 3"), "{err}");
        // Tiles that are not a candidate (a file from another version, or edited).
        let err = parse(&format!("{head}128 512 64 0 1 0 0 0 = 64 64 8 4 4 2 0\n")).unwrap_err();
        assert!(err.contains("not a candidate"), "{err}");
        let err = parse(&format!("{head}128 512 64 0 1 0 0 0 = 64 64 8 4 4 7 0\n")).unwrap_err();
        assert!(err.contains("line 2"), "{err}");
    }
}
