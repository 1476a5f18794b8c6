//! Fuzzed file readers (issue 13): every reader of untrusted files is fed mutated
//! copies of a small valid file it reads, built here. The mutations flip and
//! overwrite bytes, write interesting 32- and 64-bit values (both byte orders) over
//! length and count fields, truncate, insert, delete and duplicate byte runs, and
//! replace numbers in text (JSON headers, CSV fields) with huge, negative or
//! non-numeric ones; text and binary files are also read gzip'd.
//!
//! The property, for every case: the reader returns `Ok` or its typed error naming
//! the file, never panics; the case finishes within [`CASE_LIMIT`]; and no single
//! allocation made while reading is larger than [`ALLOC_FACTOR`] times the
//! (decompressed) file plus [`ALLOC_SLACK`], which a buffer sized from an
//! unchecked length or count (a tensor count of 2⁶⁰) would break. A counting
//! global allocator measures it.
//!
//! Cases per run (fixed, so every CI run does the same work; the seed is fixed
//! too, so a failure reproduces): GGUF 10,000; safetensors `load` 600 and
//! `load_training` followed by an optimiser step 600; IDX 1,500; digits CSV 800;
//! generic CSV 1,500. The 15,000 cases take about 1.5 s in the dev profile on an
//! idle 2-core machine and 10–15 s on a busy one (the targets that write files
//! dominate). `PROPTEST_CASES=N` runs `N` cases per target instead, and
//! `PROPTEST_RNG_SEED=S` another seed, to fuzz longer by hand.
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use half::f16;
// Not proptest's prelude: its `Rng` would shadow Volta's.
use proptest::prelude::{Just, Strategy, any, prop, prop_oneof, proptest};
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use volta::data::DataError;
use volta::data::readers::csv::{self, CsvOptions, LabelColumn};
use volta::data::readers::{digits, idx};
use volta::io::gguf::Gguf;
use volta::io::{self, CheckpointError, Metadata};
use volta::nn::loss::cross_entropy;
use volta::prelude::*;

// ------------------------------------------------------------ allocation probe

/// The system allocator, noting the largest request made on each thread.
struct Probe;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: allocations while the thread's locals are torn down are not noted.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is forwarded to `System` unchanged.
unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static PROBE: Probe = Probe;

/// A case may take this long (parsing these files takes microseconds).
const CASE_LIMIT: Duration = Duration::from_secs(2);
/// The largest allocation allowed per byte of file: parsed values are larger than
/// their encodings (a one-byte `u8` in a GGUF array is a 32-byte `Value`, a pixel
/// an `f32`), and vectors grow by doubling.
const ALLOC_FACTOR: usize = 64;
/// Allowed on top: buffers of fixed size (gzip's window, hash maps, a model).
const ALLOC_SLACK: usize = 256 << 10;

/// Runs `read` on a file of `len` (decompressed) bytes and checks the time and
/// allocation bounds.
fn bounded<T>(what: &str, len: usize, read: impl FnOnce() -> T) -> T {
    LARGEST.with(|l| l.set(0));
    let start = Instant::now();
    let out = read();
    let elapsed = start.elapsed();
    let largest = LARGEST.with(Cell::get);
    assert!(
        elapsed < CASE_LIMIT,
        "{what}: reading a {len}-byte file took {elapsed:?}"
    );
    let limit = len.saturating_mul(ALLOC_FACTOR) + ALLOC_SLACK;
    assert!(
        largest <= limit,
        "{what}: a {len}-byte file made a {largest}-byte allocation (limit {limit})"
    );
    out
}

/// The probe itself: an allocation sized from a length the file does not back
/// fails the bound.
#[test]
#[should_panic(expected = "a 10-byte file made a 1048576-byte allocation")]
fn the_allocation_probe_catches_an_unchecked_length() {
    bounded("probe", 10, || vec![0u8; 1 << 20]);
}

// ------------------------------------------------------------ mutations

/// One change to a file's bytes. Positions are [`Index`]es, scaled to the bytes
/// present when the mutation applies.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR a byte.
    Flip(Index, u8),
    /// Overwrite 4 or 8 bytes with an integer, little- or big-endian.
    Word {
        at: Index,
        value: u64,
        wide: bool,
        big_endian: bool,
    },
    /// Cut the file.
    Truncate(Index),
    /// Insert bytes.
    Insert(Index, Vec<u8>),
    /// Delete up to this many bytes.
    Delete(Index, usize),
    /// Copy a run of the file over another place.
    Splice { from: Index, to: Index, len: usize },
    /// Replace the chosen run of ASCII digits (a number in text) with this text.
    Number(Index, String),
}

/// Lengths, counts and offsets that break readers: zero, boundaries of `i32`,
/// `u32` and `u64`, and sizes a file cannot hold.
fn interesting_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![
            0,
            1,
            2,
            0x7f,
            0x80,
            0xff,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            1 << 32,
            1 << 40,
            1 << 60,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ]),
        0..1024u64,
        any::<u64>(),
    ]
}

/// Texts that replace a number in a text file.
fn interesting_number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "10",
            "17",
            "65",
            "1.5",
            "-0",
            "nan",
            "inf",
            "1e39",
            "4294967295",
            "4294967296",
            "9223372036854775807",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999999",
            "",
        ])
        .prop_map(String::from),
        interesting_u64().prop_map(|v| v.to_string()),
    ]
}

fn number_mutation() -> impl Strategy<Value = Mutation> {
    (any::<Index>(), interesting_number()).prop_map(|(i, s)| Mutation::Number(i, s))
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Mutation::Flip(i, x)),
        3 => (any::<Index>(), interesting_u64(), any::<bool>(), any::<bool>()).prop_map(
            |(at, value, wide, big_endian)| Mutation::Word { at, value, wide, big_endian }
        ),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (any::<Index>(), 1..32usize).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (any::<Index>(), any::<Index>(), 1..64usize)
            .prop_map(|(from, to, len)| Mutation::Splice { from, to, len }),
        3 => number_mutation(),
    ]
}

/// Up to `max` mutations.
fn mutations(max: usize) -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 0..=max)
}

/// Up to `max` mutations of a text that must stay well-formed to get far (a JSON
/// header): mostly numbers replaced.
fn text_mutations(max: usize) -> impl Strategy<Value = Vec<Mutation>> {
    let m = prop_oneof![4 => number_mutation(), 1 => mutation()];
    prop::collection::vec(m, 0..=max)
}

/// The runs of ASCII digits in `b`, as ranges.
fn numbers(b: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in b.iter().enumerate() {
        match (c.is_ascii_digit(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(s..b.len());
    }
    out
}

fn apply(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
    for m in mutations {
        let len = bytes.len();
        match m {
            Mutation::Flip(i, x) if len > 0 => bytes[i.index(len)] ^= x,
            Mutation::Word {
                at,
                value,
                wide,
                big_endian,
            } if len > 0 => {
                let word = match (wide, big_endian) {
                    (true, false) => value.to_le_bytes().to_vec(),
                    (true, true) => value.to_be_bytes().to_vec(),
                    (false, false) => (*value as u32).to_le_bytes().to_vec(),
                    (false, true) => (*value as u32).to_be_bytes().to_vec(),
                };
                let at = at.index(len);
                let end = (at + word.len()).min(len);
                bytes[at..end].copy_from_slice(&word[..end - at]);
            }
            Mutation::Truncate(i) => bytes.truncate(i.index(len + 1)),
            Mutation::Insert(i, b) => {
                let at = i.index(len + 1);
                bytes.splice(at..at, b.iter().copied());
            }
            Mutation::Delete(i, n) if len > 0 => {
                let at = i.index(len);
                bytes.drain(at..(at + n).min(len));
            }
            Mutation::Splice { from, to, len: n } if len > 0 => {
                let from = from.index(len);
                let run = bytes[from..(from + n).min(len)].to_vec();
                let to = to.index(len);
                let end = (to + run.len()).min(len);
                bytes[to..end].copy_from_slice(&run[..end - to]);
            }
            Mutation::Number(i, text) => {
                let runs = numbers(bytes);
                if !runs.is_empty() {
                    let run = runs[i.index(runs.len())].clone();
                    bytes.splice(run, text.bytes());
                }
            }
            _ => {}
        }
    }
}

// ------------------------------------------------------------ files

/// A fresh directory for one target, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("volta-fuzz-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    /// Writes `bytes` (gzip'd when `gz`) as `name`; returns the path and the size
    /// the reader will see after decompressing.
    fn write(&self, name: &str, bytes: &[u8], gz: bool) -> (PathBuf, usize) {
        let path = self.0.join(name);
        let data = if gz { gzip(bytes) } else { bytes.to_vec() };
        std::fs::write(&path, &data).expect("write");
        (path, data.len().max(bytes.len()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(bytes).expect("in memory");
    e.finish().expect("in memory")
}

/// The size a (possibly corrupt) gzip stream decompresses to, as far as it goes.
fn gunzipped_len(bytes: &[u8]) -> usize {
    let mut out = Vec::new();
    let _ = MultiGzDecoder::new(bytes).read_to_end(&mut out);
    out.len()
}

fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(cases);
    let mut config = Config::with_cases(cases);
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(13);
    }
    // A failure prints its shrunk input; nothing is written into the source tree.
    config.failure_persistence = None;
    config
}

// ------------------------------------------------------------ GGUF

/// GGUF bytes, field by field.
#[derive(Default)]
struct GgufWriter(Vec<u8>);

impl GgufWriter {
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend(s.as_bytes());
        self
    }
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    fn pad_to(&mut self, alignment: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(alignment) {
            self.0.push(0);
        }
        self
    }
}

/// A valid GGUF file: scalar, string and nested-array metadata, an alignment of 32,
/// and F32, F16, Q8_0, Q4_0, Q4_1 and Q6_K (a K-quant) tensors.
fn valid_gguf() -> Vec<u8> {
    let mut w = GgufWriter::default();
    w.0.extend(b"GGUF");
    w.u32(3).u64(6).u64(7);
    w.str("general.architecture").u32(8).str("llama");
    w.str("general.alignment").u32(4).u32(32);
    w.str("a.u64").u32(10).u64(1 << 40);
    w.str("a.f32").u32(6).0.extend(1.5f32.to_le_bytes());
    w.str("a.words").u32(9).u32(8).u64(2).str("hi").str("ü");
    w.str("a.ints").u32(9).u32(5).u64(2);
    w.0.extend(4i32.to_le_bytes());
    w.0.extend((-5i32).to_le_bytes());
    w.str("a.deep").u32(9).u32(9).u64(2).u32(8).u64(1).str("x");
    w.u32(0).u64(0);
    let q6k = 14;
    for (name, dims, ty, offset) in [
        ("f32", &[3u64, 2][..], 0, 0),
        ("f16", &[2], 1, 32),
        ("q8", &[32], 8, 64),
        ("q4_0", &[32], 2, 128),
        ("q4_1", &[32, 1], 3, 160),
        ("q6k", &[256], q6k, 192),
    ] {
        w.tensor(name, dims, ty, offset);
    }
    w.pad_to(32);
    for i in 0..6 {
        w.0.extend((i as f32 - 2.5).to_le_bytes());
    }
    w.pad_to(32);
    for x in [0.5f32, -1.0] {
        w.0.extend(f16::from_f32(x).to_le_bytes());
    }
    w.pad_to(32);
    w.0.extend(f16::from_f32(0.25).to_le_bytes());
    w.0.extend((0..32).map(|i| (i as i8 - 16) as u8));
    w.pad_to(32);
    w.0.extend(f16::from_f32(0.5).to_le_bytes());
    w.0.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
    w.pad_to(32);
    w.0.extend(f16::from_f32(0.25).to_le_bytes());
    w.0.extend(f16::from_f32(-1.0).to_le_bytes());
    w.0.extend((0..16u8).map(|i| i | (i << 4)));
    w.pad_to(32);
    w.0.extend((0..210).map(|i| i as u8));
    w.0
}

/// Parses GGUF bytes and, when they parse, reads every key and tensor.
fn read_gguf(bytes: Vec<u8>) {
    let len = bytes.len();
    bounded("GGUF", len, || match Gguf::parse("fuzz.gguf", bytes) {
        Err(e) => assert!(e.to_string().starts_with("GGUF file fuzz.gguf: "), "{e}"),
        Ok(g) => {
            for (k, _) in g.metadata() {
                let _ = (g.get_u32(k), g.get_i64(k), g.get_f64(k), g.get_bool(k));
                let _ = (g.get_str(k), g.get_str_array(k), g.get_i64_array(k));
            }
            for t in g.tensors() {
                let _ = (t.shape(), t.len(), t.ty.to_string());
                let _ = g.tensor(&t.name).map(|(_, raw)| raw.len());
                let _ = g.dequantize(&t.name);
            }
        }
    });
}

#[test]
fn the_gguf_seed_file_is_valid() {
    let g = Gguf::parse("seed.gguf", valid_gguf()).expect("valid");
    assert_eq!((g.tensors().len(), g.metadata().len()), (6, 7));
    for t in ["f32", "f16", "q8", "q4_0", "q4_1"] {
        g.dequantize(t).expect(t);
    }
    assert_eq!(g.tensor("q6k").expect("raw bytes").1.len(), 210);
}

proptest! {
    #![proptest_config(config(10_000))]

    /// GGUF: `Gguf::parse`, then every getter and every tensor's bytes and values.
    #[test]
    fn gguf_reader_never_panics(m in mutations(5)) {
        let mut bytes = valid_gguf();
        apply(&mut bytes, &m);
        read_gguf(bytes);
    }
}

// ------------------------------------------------------------ safetensors

model! {
    /// A small model with weights, biases and dropout counters.
    pub struct Tiny for (B, 3) -> (B, 2) {
        fc: Linear<4>,
        relu,
        drop: Dropout<0.5>,
        out: Linear<2>,
    }
}

/// One training step of `net` with `opt` on a fixed batch.
fn train_step<O: Optimizer<Cpu, f32>>(net: &mut Tiny<Cpu>, opt: &mut O) {
    let x = Tensor::<(Const<4>, Const<3>)>::randn(&mut Rng::seed(5));
    let y = Tensor::<(Const<4>,), Cpu, u32>::from_array([0, 1, 1, 0]);
    let grads = cross_entropy(&net.forward(&x), &y).backward();
    opt.step(net, &grads);
}

/// A checkpoint `save_training` wrote after one Adam step, split into its JSON
/// header and its data.
fn valid_checkpoint(dir: &TempDir) -> (Vec<u8>, Vec<u8>) {
    let mut net = Tiny::<Cpu>::new(&mut Rng::seed(1));
    let mut adam = Adam::<Cpu>::new(1e-2);
    train_step(&mut net, &mut adam);
    let path = dir.0.join("seed.safetensors");
    let meta = Metadata::from([("epoch".to_string(), "1".to_string())]);
    io::save_training(&path, &mut net, &adam, &meta).expect("save");
    let bytes = std::fs::read(&path).expect("read");
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    (bytes[8..8 + n].to_vec(), bytes[8 + n..].to_vec())
}

/// A mutated checkpoint: the header and the data mutated apart (the length prefix
/// recomputed unless `keep_prefix`), then the whole file.
fn checkpoint_bytes(
    (header, data): &(Vec<u8>, Vec<u8>),
    [h, d, whole]: &[Vec<Mutation>; 3],
    keep_prefix: bool,
) -> Vec<u8> {
    let (mut header, mut data) = (header.clone(), data.clone());
    let prefix = header.len() as u64;
    apply(&mut header, h);
    apply(&mut data, d);
    let prefix = if keep_prefix {
        prefix
    } else {
        header.len() as u64
    };
    let mut bytes = prefix.to_le_bytes().to_vec();
    bytes.extend(header);
    bytes.extend(data);
    apply(&mut bytes, whole);
    bytes
}

fn checkpoint_mutations() -> impl Strategy<Value = [Vec<Mutation>; 3]> {
    (text_mutations(3), mutations(2), mutations(1)).prop_map(|(h, d, w)| [h, d, w])
}

/// The error names the file.
fn names_checkpoint(e: &CheckpointError, path: &Path) {
    let file = path.file_name().expect("a file").to_string_lossy();
    assert!(e.to_string().contains(&*file), "{e}");
}

#[test]
fn the_checkpoint_seed_file_is_valid() {
    let dir = TempDir::new("ckpt-seed");
    let seed = valid_checkpoint(&dir);
    let bytes = checkpoint_bytes(&seed, &Default::default(), false);
    let (path, _) = dir.write("ok.safetensors", &bytes, false);
    let mut net = Tiny::<Cpu>::new(&mut Rng::seed(2));
    let mut adam = Adam::<Cpu>::new(1e-2);
    let meta = io::load_training(&path, &mut net, &mut adam).expect("loads");
    assert_eq!(meta.get("epoch").map(String::as_str), Some("1"));
    train_step(&mut net, &mut adam);
}

proptest! {
    #![proptest_config(config(600))]

    /// safetensors: `io::load` into a model; whatever loads runs forward.
    #[test]
    fn checkpoint_load_never_panics(m in checkpoint_mutations(), keep_prefix in prop::bool::weighted(0.1)) {
        thread_local! {
            static SEED: (TempDir, (Vec<u8>, Vec<u8>)) = {
                let dir = TempDir::new("ckpt-load");
                let seed = valid_checkpoint(&dir);
                (dir, seed)
            };
        }
        SEED.with(|(dir, seed)| {
            let bytes = checkpoint_bytes(seed, &m, keep_prefix);
            let (path, len) = dir.write("fuzz.safetensors", &bytes, false);
            let mut net = Tiny::<Cpu>::new(&mut Rng::seed(2));
            let result = bounded("safetensors load", len, || io::load(&path, &mut net));
            match result {
                Err(e) => names_checkpoint(&e, &path),
                Ok(_) => {
                    let x = Tensor::<(Const<2>, Const<3>)>::ones();
                    let _ = net.forward(&x).to_vec();
                }
            }
        });
    }

    /// safetensors: `io::load_training` into a model and Adam or SGD; whatever
    /// loads takes an optimiser step.
    #[test]
    fn checkpoint_load_training_never_panics(
        m in checkpoint_mutations(),
        keep_prefix in prop::bool::weighted(0.1),
        adam in any::<bool>(),
    ) {
        thread_local! {
            static SEED: (TempDir, (Vec<u8>, Vec<u8>)) = {
                let dir = TempDir::new("ckpt-train");
                let seed = valid_checkpoint(&dir);
                (dir, seed)
            };
        }
        SEED.with(|(dir, seed)| {
            let bytes = checkpoint_bytes(seed, &m, keep_prefix);
            let (path, len) = dir.write("fuzz.safetensors", &bytes, false);
            let mut net = Tiny::<Cpu>::new(&mut Rng::seed(2));
            if adam {
                let mut opt = Adam::<Cpu>::new(1e-2);
                let r = bounded("safetensors load_training", len, || {
                    io::load_training(&path, &mut net, &mut opt)
                });
                match r {
                    Err(e) => names_checkpoint(&e, &path),
                    Ok(_) => train_step(&mut net, &mut opt),
                }
            } else {
                let mut opt = Sgd::<Cpu>::new(0.1).with_momentum(0.9);
                let r = bounded("safetensors load_training", len, || {
                    io::load_training(&path, &mut net, &mut opt)
                });
                match r {
                    Err(e) => names_checkpoint(&e, &path),
                    Ok(_) => train_step(&mut net, &mut opt),
                }
            }
        });
    }
}

// ------------------------------------------------------------ IDX

/// An IDX images file of 3 images of 4×5 pixels, and its labels file.
fn valid_idx() -> (Vec<u8>, Vec<u8>) {
    let mut images = Vec::new();
    for v in [idx::IMAGES_MAGIC, 3, 4, 5] {
        images.extend(v.to_be_bytes());
    }
    images.extend((0..60u8).map(|k| k.wrapping_mul(37)));
    let mut labels = Vec::new();
    for v in [idx::LABELS_MAGIC, 3] {
        labels.extend(v.to_be_bytes());
    }
    labels.extend([7, 0, 9]);
    (images, labels)
}

/// The error names one of the files.
fn names_data(e: &DataError, paths: &[&Path]) {
    let text = e.to_string();
    assert!(
        paths
            .iter()
            .any(|p| e.path() == Some(*p) && text.contains(&p.display().to_string())),
        "{e}"
    );
}

proptest! {
    #![proptest_config(config(1500))]

    /// IDX: an images and a labels file, each mutated and maybe gzip'd (and then
    /// maybe mutated again, corrupting the gzip stream).
    #[test]
    fn idx_reader_never_panics(
        mi in mutations(4),
        ml in mutations(3),
        gz in any::<(bool, bool)>(),
        mgz in mutations(1),
        classes in prop_oneof![3 => Just(10usize), 1 => 0..12usize],
    ) {
        thread_local! {
            static DIR: TempDir = TempDir::new("idx");
        }
        DIR.with(|dir| {
            let (mut images, mut labels) = valid_idx();
            apply(&mut images, &mi);
            apply(&mut labels, &ml);
            let (img, img_len) = dir.write("images", &images, gz.0);
            let (lab, lab_len) = dir.write("labels", &labels, gz.1);
            // Corrupt the compressed images file too.
            let mut len = img_len + lab_len;
            if gz.0 && !mgz.is_empty() {
                let mut raw = std::fs::read(&img).expect("read");
                apply(&mut raw, &mgz);
                std::fs::write(&img, &raw).expect("write");
                len = len.max(raw.len() + gunzipped_len(&raw) + lab_len);
            }
            match bounded("IDX", len, || idx::load(&img, &lab, classes)) {
                Err(e) => names_data(&e, &[&img, &lab]),
                Ok(d) => {
                    assert_eq!(d.features().len(), d.len() * d.dims().iter().product::<usize>());
                    assert!(d.labels().iter().all(|&l| (l as usize) < classes));
                }
            }
        });
    }
}

// ------------------------------------------------------------ CSV

/// A digits CSV file: 3 rows of 64 pixels and a label.
fn valid_digits() -> Vec<u8> {
    let mut text = String::new();
    for r in 0..3 {
        let row: Vec<String> = (0..digits::PIXELS)
            .map(|k| ((k * 7 + r) % 17).to_string())
            .chain([(r * 4).to_string()])
            .collect();
        text += &row.join(",");
        text += if r == 1 { "\r\n\n" } else { "\n" };
    }
    text.into_bytes()
}

/// A generic CSV file with a header.
fn valid_csv() -> Vec<u8> {
    b"x,y,z,label\n1, 2.5 ,-3,0\r\n\n4e1,0.25,7,2\n-0.5,1e-3,8,1\n".to_vec()
}

/// The options `valid_csv` needs half the time (so mutations of the values get
/// far), random ones otherwise.
fn csv_options() -> impl Strategy<Value = CsvOptions> {
    let matching = CsvOptions::new(3).header(true);
    let label = prop_oneof![
        Just(LabelColumn::First),
        Just(LabelColumn::Last),
        (0..6usize).prop_map(LabelColumn::Index),
        Just(LabelColumn::Index(usize::MAX)),
    ];
    let delimiter = prop::sample::select(vec![b',', b';', b'\t', b' ', b'.', b'\n', 0xff]);
    let random = (0..5usize, label, any::<bool>(), delimiter).prop_map(
        |(classes, label, header, delimiter)| {
            CsvOptions::new(classes)
                .label_column(label)
                .header(header)
                .delimiter(delimiter)
        },
    );
    prop_oneof![Just(matching), random]
}

proptest! {
    #![proptest_config(config(800))]

    /// The digits CSV reader, plain and gzip'd.
    #[test]
    fn digits_reader_never_panics(m in mutations(5), gz in any::<bool>()) {
        thread_local! {
            static DIR: TempDir = TempDir::new("digits");
        }
        DIR.with(|dir| {
            let mut bytes = valid_digits();
            apply(&mut bytes, &m);
            let (path, len) = dir.write("digits.csv", &bytes, gz);
            match bounded("digits CSV", len, || digits::load(&path)) {
                Err(e) => names_data(&e, &[&path]),
                Ok(d) => assert_eq!(d.features().len(), d.len() * digits::PIXELS),
            }
        });
    }
}

proptest! {
    #![proptest_config(config(1500))]

    /// The generic CSV reader with random options, plain and gzip'd.
    #[test]
    fn csv_reader_never_panics(
        m in mutations(5),
        gz in any::<bool>(),
        options in csv_options(),
    ) {
        thread_local! {
            static DIR: TempDir = TempDir::new("csv");
        }
        DIR.with(|dir| {
            let mut bytes = valid_csv();
            apply(&mut bytes, &m);
            let (path, len) = dir.write("data.csv", &bytes, gz);
            match bounded("CSV", len, || csv::load(&path, &options)) {
                Err(e) => names_data(&e, &[&path]),
                Ok(d) => {
                    assert_eq!(d.features().len(), d.len() * d.dims().iter().product::<usize>());
                }
            }
        });
    }
}

// ------------------------------------------------------------ regressions

/// A checkpoint `save_training` wrote after one Adam step, with the tensors and
/// metadata rewritten by `edit` (name, dims, f32 values; `None` drops a tensor).
fn edited_checkpoint(
    dir: &TempDir,
    name: &str,
    edit: impl Fn(&str, Vec<usize>, Vec<f32>) -> Option<(Vec<usize>, Vec<f32>)>,
    edit_metadata: impl Fn(&mut std::collections::HashMap<String, String>),
) -> PathBuf {
    use safetensors::SafeTensors;
    let (header, data) = valid_checkpoint(dir);
    let bytes = checkpoint_bytes(&(header, data), &Default::default(), false);
    let file = SafeTensors::deserialize(&bytes).expect("valid");
    let (_, meta) = SafeTensors::read_metadata(&bytes).expect("valid");
    let mut metadata = meta.metadata().clone().unwrap_or_default();
    edit_metadata(&mut metadata);
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .filter_map(|(n, v)| {
            let values = v
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            let (dims, values) = edit(&n, v.shape().to_vec(), values)?;
            let bytes = values.iter().flat_map(|x| x.to_le_bytes()).collect();
            Some((n, dims, bytes))
        })
        .collect();
    let views = tensors.iter().map(|(n, dims, bytes)| {
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, dims.clone(), bytes);
        (n.as_str(), view.expect("consistent"))
    });
    let out = safetensors::serialize(views, Some(metadata)).expect("serialise");
    dir.write(name, &out, false).0
}

/// Found by fuzzing: an Adam step count of 3·10⁹ in the file saturated to
/// `i32::MAX` and the next step overflowed (`t + 1`, adam.rs). It is an optimiser
/// error when loading now.
#[test]
fn an_adam_step_count_out_of_range_is_an_error() {
    let dir = TempDir::new("reg-step");
    for bad in [3e9, -1.0, 2.5, f32::NAN] {
        let path = edited_checkpoint(
            &dir,
            "step.safetensors",
            |n, dims, v| Some((dims, if n == "optim/0.step" { vec![bad] } else { v })),
            |_| {},
        );
        let mut net = Tiny::<Cpu>::new(&mut Rng::seed(2));
        let mut adam = Adam::<Cpu>::new(1e-2);
        let e = io::load_training(&path, &mut net, &mut adam).unwrap_err();
        assert!(matches!(e, CheckpointError::Optimizer { .. }), "{bad}: {e}");
        assert!(e.to_string().contains("`0.step`"), "{e}");
    }
}

/// Found by reading the loader (the fuzzing rarely writes this exact key): a
/// file's optimiser step count of 2⁶⁴ − 1 loaded, and the next step overflowed
/// (`steps += 1`). The count saturates now.
#[test]
fn an_optimiser_step_count_of_u64_max_does_not_overflow() {
    let dir = TempDir::new("reg-steps");
    let path = edited_checkpoint(
        &dir,
        "steps.safetensors",
        |_, dims, v| Some((dims, v)),
        |m| {
            m.insert("volta.optim.step".into(), u64::MAX.to_string());
        },
    );
    let mut net = Tiny::<Cpu>::new(&mut Rng::seed(2));
    let mut adam = Adam::<Cpu>::new(1e-2);
    io::load_training(&path, &mut net, &mut adam).expect("loads");
    train_step(&mut net, &mut adam);
    assert_eq!(Optimizer::<Cpu, f32>::state(&adam).step, u64::MAX);
}

/// Found by reading the loader: a one-element `exp_avg` for a 4×3 weight was taken
/// as a scalar (like a step count), loaded, and the next step panicked on its dims.
/// Only a `step` slot may be a single value now.
#[test]
fn a_one_element_moment_for_a_larger_parameter_is_a_mismatch() {
    let dir = TempDir::new("reg-moment");
    let path = edited_checkpoint(
        &dir,
        "moment.safetensors",
        |n, dims, v| {
            Some(if n == "optim/0.exp_avg" {
                (vec![1], vec![0.5])
            } else {
                (dims, v)
            })
        },
        |_| {},
    );
    let mut net = Tiny::<Cpu>::new(&mut Rng::seed(2));
    let mut adam = Adam::<Cpu>::new(1e-2);
    let e = io::load_training(&path, &mut net, &mut adam).unwrap_err();
    let CheckpointError::Mismatch { mismatches, .. } = &e else {
        panic!("{e}")
    };
    assert!(
        matches!(&mismatches[..], [volta::io::Mismatch::Shape { name, .. }] if name == "optim/0.exp_avg"),
        "{e}"
    );
}

/// Found by fuzzing: `LabelColumn::Index(usize::MAX)` overflowed computing the
/// column count the error reports.
#[test]
fn a_label_column_past_usize_max_is_a_column_count_error() {
    let dir = TempDir::new("reg-csv");
    let (path, _) = dir.write("a.csv", b"1,2,0\n", false);
    let options = CsvOptions::new(3).label_column(LabelColumn::Index(usize::MAX));
    let e = csv::load(&path, &options).unwrap_err();
    assert!(
        matches!(
            e,
            DataError::ColumnCount {
                expected: usize::MAX,
                found: 3,
                ..
            }
        ),
        "{e}"
    );
}

/// Counts and lengths far past the file's size (a tensor count of 2⁶⁰, a string
/// of 2⁶⁴ − 1 bytes, 2³² − 1 images of 2³² − 1 × 2³² − 1 pixels) are errors found
/// before anything is allocated for them.
#[test]
fn huge_counts_are_errors_before_any_allocation() {
    let gguf = |tensors: u64, kvs: u64, rest: &dyn Fn(&mut GgufWriter)| {
        let mut w = GgufWriter::default();
        w.0.extend(b"GGUF");
        w.u32(3).u64(tensors).u64(kvs);
        rest(&mut w);
        w.0
    };
    let cases = [
        gguf(1 << 60, 0, &|_| {}),
        gguf(0, 1 << 60, &|_| {}),
        gguf(0, 1, &|w| {
            w.u64(u64::MAX);
        }),
        gguf(0, 1, &|w| {
            w.str("k").u32(9).u32(0).u64(1 << 60);
        }),
        gguf(0, 1, &|w| {
            w.str("k").u32(9).u32(9).u64(1 << 40);
        }),
        gguf(1, 0, &|w| {
            w.str("t").u32(u32::MAX);
        }),
        gguf(1, 0, &|w| {
            w.tensor("t", &[1 << 40, 1 << 40], 0, 0);
        }),
    ];
    for bytes in cases {
        let len = bytes.len();
        let e = bounded("GGUF", len, || Gguf::parse("huge.gguf", bytes)).unwrap_err();
        assert!(e.to_string().starts_with("GGUF file huge.gguf: "), "{e}");
    }

    let dir = TempDir::new("huge-idx");
    let mut images = Vec::new();
    for v in [idx::IMAGES_MAGIC, u32::MAX, u32::MAX, u32::MAX] {
        images.extend(v.to_be_bytes());
    }
    let mut labels = Vec::new();
    for v in [idx::LABELS_MAGIC, u32::MAX] {
        labels.extend(v.to_be_bytes());
    }
    let (_, good_labels) = valid_idx();
    let (good_images, _) = valid_idx();
    for (img, lab) in [(&images, &good_labels), (&good_images, &labels)] {
        let (img, a) = dir.write("images", img, false);
        let (lab, b) = dir.write("labels", lab, false);
        let e = bounded("IDX", a + b, || idx::load(&img, &lab, 10)).unwrap_err();
        assert!(matches!(e, DataError::Truncated { .. }), "{e}");
    }
}
