//! The data pipeline end to end: readers on valid and corrupt files (written here,
//! plain and gzip'd), and the loader's batching, shuffling, prefetch thread and GPU
//! uploads.
use flate2::Compression;
use flate2::write::GzEncoder;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use volta::data::readers::csv::{self, CsvOptions, LabelColumn};
use volta::data::readers::{digits, idx};
use volta::data::{DataError, DataLoader, Dataset, Labelled, Position, Sample};
use volta::prelude::*;

// ---------------------------------------------------------------- files

/// A fresh directory under the system temp dir for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("volta-data-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Writes `bytes` to `dir/name`, gzip'd when `name` ends in `.gz`.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    let data = if name.ends_with(".gz") {
        gzip(bytes)
    } else {
        bytes.to_vec()
    };
    std::fs::write(&path, data).unwrap();
    path
}

/// An IDX images file: `n` images of `rows × cols`, pixel `(i + k) % 256`.
fn idx_images(n: u32, rows: u32, cols: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [idx::IMAGES_MAGIC, n, rows, cols] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend((0..(n * rows * cols) as usize).map(|k| (k % 256) as u8));
    b
}

fn idx_labels(labels: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [idx::LABELS_MAGIC, labels.len() as u32] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(labels);
    b
}

/// The error names `path` and its text mentions it.
fn names(e: &DataError, path: &Path) {
    assert_eq!(e.path(), Some(path), "{e:?}");
    assert!(
        e.to_string().contains(&path.display().to_string()),
        "`{e}` does not name {}",
        path.display()
    );
}

// ---------------------------------------------------------------- IDX

#[test]
fn idx_reads_plain_and_gzip() {
    let dir = temp_dir("idx-ok");
    for ext in ["", ".gz"] {
        let img = write(&dir, &format!("img{ext}"), &idx_images(3, 2, 4));
        let lab = write(&dir, &format!("lab{ext}"), &idx_labels(&[7, 0, 9]));
        let d = idx::load(&img, &lab, 10).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d.sample_dims(), &[1, 2, 4]);
        assert_eq!(d.labels(), &[7, 0, 9]);
        assert_eq!(d.sample(1)[0], 8.0 / 255.0);
        assert_eq!(d.classes(), 10);
    }
}

#[test]
fn corrupt_idx_files_give_typed_errors_naming_the_file() {
    let dir = temp_dir("idx-bad");
    for ext in ["", ".gz"] {
        let good_img = write(&dir, &format!("img{ext}"), &idx_images(3, 2, 2));
        let good_lab = write(&dir, &format!("lab{ext}"), &idx_labels(&[1, 2, 3]));
        let img = |name: &str, bytes: &[u8]| write(&dir, &format!("{name}{ext}"), bytes);

        // Truncated body, truncated header, empty file.
        let full = idx_images(3, 2, 2);
        let p = img("short", &full[..full.len() - 1]);
        let e = idx::load(&p, &good_lab, 10).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::Truncated {
                    expected: 28,
                    found: 27,
                    ..
                }
            ),
            "{e:?}"
        );
        names(&e, &p);
        let p = img("header", &full[..10]);
        let e = idx::load(&p, &good_lab, 10).unwrap_err();
        assert!(
            matches!(e, DataError::Truncated { expected: 16, .. }),
            "{e:?}"
        );
        names(&e, &p);
        let p = img("empty-file", b"");
        let e = idx::load(&p, &good_lab, 10).unwrap_err();
        assert!(matches!(e, DataError::Truncated { found: 0, .. }), "{e:?}");

        // Trailing bytes.
        let mut long = full.clone();
        long.push(0);
        let p = img("long", &long);
        let e = idx::load(&p, &good_lab, 10).unwrap_err();
        assert!(matches!(e, DataError::TrailingBytes { .. }), "{e:?}");
        names(&e, &p);

        // Wrong magic: images and labels swapped.
        let e = idx::load(&good_lab, &good_img, 10).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::BadMagic {
                    expected: 0x803,
                    found: 0x801,
                    ..
                }
            ),
            "{e:?}"
        );
        names(&e, &good_lab);

        // A header claiming 2^31 images of 2^16 × 2^16 (an overflowing product) or
        // 2^31 images of 1 × 1: an error, not an allocation.
        for (n, r, c) in [(1u32 << 31, 1u32 << 16, 1u32 << 16), (1 << 31, 1, 1)] {
            let mut huge = idx_images(1, 1, 1);
            huge[4..8].copy_from_slice(&n.to_be_bytes());
            huge[8..12].copy_from_slice(&r.to_be_bytes());
            huge[12..16].copy_from_slice(&c.to_be_bytes());
            let p = img("huge", &huge);
            let e = idx::load(&p, &good_lab, 10).unwrap_err();
            assert!(matches!(e, DataError::Truncated { found: 17, .. }), "{e:?}");
            names(&e, &p);
        }
        let mut huge = idx_labels(&[1]);
        huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let p = img("huge-labels", &huge);
        let e = idx::load(&good_img, &p, 10).unwrap_err();
        assert!(matches!(e, DataError::Truncated { .. }), "{e:?}");
        names(&e, &p);

        // No images.
        let p = img("none", &idx_images(0, 2, 2));
        let e = idx::load(&p, &good_lab, 10).unwrap_err();
        assert!(matches!(e, DataError::Empty { .. }), "{e:?}");
        names(&e, &p);

        // Counts disagree.
        let p = img("two-labels", &idx_labels(&[1, 2]));
        let e = idx::load(&good_img, &p, 10).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::CountMismatch {
                    image_count: 3,
                    label_count: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains(&p.display().to_string()));
        assert!(e.to_string().contains(&good_img.display().to_string()));

        // A label out of range, with its item and offset.
        let p = img("label-10", &idx_labels(&[1, 10, 2]));
        let e = idx::load(&good_img, &p, 10).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::LabelOutOfRange {
                    label: 10,
                    classes: 10,
                    at: Position::Item {
                        index: 1,
                        offset: 9
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        names(&e, &p);
    }

    // A gzip header followed by garbage; a file that does not exist.
    let p = write(&dir, "garbage", &[0x1f, 0x8b, 1, 2, 3, 4, 5]);
    let e = idx::load(&p, &p, 10).unwrap_err();
    assert!(matches!(e, DataError::Gzip { .. }), "{e:?}");
    names(&e, &p);
    let p = dir.join("missing");
    let e = idx::load(&p, &p, 10).unwrap_err();
    assert!(matches!(e, DataError::Io { .. }), "{e:?}");
    names(&e, &p);
}

// ---------------------------------------------------------------- CSV

#[test]
fn csv_reads_plain_and_gzip() {
    let dir = temp_dir("csv-ok");
    let text = "x0,x1,label\n0.5,1,2\n\n-1,3e2,0\n";
    for name in ["a.csv", "a.csv.gz"] {
        let p = write(&dir, name, text.as_bytes());
        let d = csv::load(&p, &CsvOptions::new(3).header(true)).unwrap();
        assert_eq!(d.features(), &[0.5, 1.0, -1.0, 300.0]);
        assert_eq!(d.labels(), &[2, 0]);
        assert_eq!(d.sample_dims(), &[2]);
    }
    let p = write(&dir, "first.tsv", b"1\t0.25\t4\n");
    let opts = CsvOptions::new(2)
        .label_column(LabelColumn::First)
        .delimiter(b'\t');
    let d = csv::load(&p, &opts).unwrap();
    assert_eq!((d.features(), d.labels()), (&[0.25, 4.0][..], &[1][..]));
}

#[test]
fn corrupt_csv_files_give_typed_errors_naming_the_file() {
    let dir = temp_dir("csv-bad");
    let opts = CsvOptions::new(3);
    for ext in ["", ".gz"] {
        let load = |name: &str, text: &str| {
            let p = write(&dir, &format!("{name}.csv{ext}"), text.as_bytes());
            let e = csv::load(&p, &opts).unwrap_err();
            names(&e, &p);
            e
        };
        let e = load("columns", "1,2,0\n1,2,0\n1,0\n");
        assert!(
            matches!(
                e,
                DataError::ColumnCount {
                    line: 3,
                    expected: 3,
                    found: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = load("number", "1,2,0\n1,two,0\n");
        assert!(
            matches!(
                e,
                DataError::BadValue {
                    line: 2,
                    column: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("line 2, column 2: `two`"), "{e}");
        let e = load("label", "1,2,0\n1,2,3\n");
        assert!(
            matches!(
                e,
                DataError::LabelOutOfRange {
                    label: 3,
                    at: Position::Line { line: 2, column: 3 },
                    ..
                }
            ),
            "{e:?}"
        );
        let e = load("fraction", "1,2,1.5\n");
        assert!(matches!(e, DataError::BadValue { column: 3, .. }), "{e:?}");
        let e = load("empty", "");
        assert!(matches!(e, DataError::Empty { .. }), "{e:?}");
        let e = load("blank", "\n \n");
        assert!(matches!(e, DataError::Empty { .. }), "{e:?}");
    }
    let p = write(&dir, "binary.csv", b"1,2,0\n\xfe\xff,0\n");
    let e = csv::load(&p, &opts).unwrap_err();
    assert!(matches!(e, DataError::NotText { line: 2, .. }), "{e:?}");
    names(&e, &p);
}

// ---------------------------------------------------------------- digits

fn digits_row(pixel: &str, label: &str) -> String {
    let mut cols = vec![pixel; digits::PIXELS];
    cols.push(label);
    cols.join(",") + "\n"
}

#[test]
fn digits_files_plain_gzip_and_corrupt() {
    let dir = temp_dir("digits");
    let good = digits_row("8", "3") + &digits_row("16", "9");
    for name in ["d.csv", "d.csv.gz"] {
        let d = digits::load(write(&dir, name, good.as_bytes())).unwrap();
        assert_eq!(d.labels(), &[3, 9]);
        assert_eq!(d.sample_dims(), &[1, 8, 8]);
        assert_eq!((d.sample(0)[0], d.sample(1)[63]), (0.5, 1.0));
    }
    let cases: [(&str, String); 4] = [
        ("columns", "1,2,3\n".to_string()),
        ("pixel", digits_row("17", "1")),
        ("label", digits_row("1", "10")),
        ("truncated", good[..good.len() - 5].to_string()),
    ];
    for (name, text) in cases {
        let p = write(&dir, &format!("{name}.csv.gz"), text.as_bytes());
        let e = digits::load(&p).unwrap_err();
        names(&e, &p);
        match name {
            "columns" | "truncated" => {
                assert!(matches!(e, DataError::ColumnCount { .. }), "{e:?}")
            }
            "pixel" => assert!(matches!(e, DataError::BadValue { column: 1, .. }), "{e:?}"),
            _ => assert!(
                matches!(e, DataError::LabelOutOfRange { label: 10, .. }),
                "{e:?}"
            ),
        }
    }
    // A gzip file cut short does not decompress.
    let gz = gzip(good.as_bytes());
    let p = dir.join("cut.csv.gz");
    std::fs::write(&p, &gz[..gz.len() / 2]).unwrap();
    let e = digits::load(&p).unwrap_err();
    assert!(matches!(e, DataError::Gzip { .. }), "{e:?}");
    names(&e, &p);
}

// ---------------------------------------------------------------- loader

/// `n` samples of 2×3 features `i + k/10`, label `i % 7`.
fn numbered(n: usize) -> Labelled {
    let features = (0..n)
        .flat_map(|i| (0..6).map(move |k| i as f32 + k as f32 / 10.0))
        .collect();
    Labelled::new(features, &[2, 3], (0..n as u32).map(|i| i % 7).collect(), 7).unwrap()
}

#[test]
fn every_sample_once_per_epoch_with_and_without_drop_last() {
    let data = numbered(23);
    let partial = DataLoader::new(data.clone())
        .features::<Rank2<2, 3>>()
        .unwrap()
        .batch::<5>()
        .shuffle(11);
    let exact = partial.clone().drop_last();
    assert_eq!((partial.len(), exact.len()), (5, 4));
    for epoch in 0..3 {
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        for b in partial.epoch(epoch) {
            let x: Tensor<(usize, Const<2>, Const<3>)> = b.inputs;
            sizes.push(x.dims()[0]);
            let xs = x.to_vec();
            let ys = b.targets.to_vec();
            for (j, &i) in b.indices.iter().enumerate() {
                // Features and labels belong to the sample the index names.
                assert_eq!(&xs[j * 6..(j + 1) * 6], data.sample(i));
                assert_eq!(ys[j], data.labels()[i]);
            }
            seen.extend(b.indices);
        }
        assert_eq!(sizes, [5, 5, 5, 5, 3]);
        seen.sort();
        assert_eq!(seen, (0..23).collect::<Vec<_>>());

        let mut seen = HashSet::new();
        for b in exact.epoch(epoch) {
            let x: Tensor<Rank3<5, 2, 3>> = b.inputs;
            let y: Tensor<Rank1<5>, Cpu, u32> = b.targets;
            assert_eq!((x.numel(), y.numel()), (30, 5));
            for i in b.indices {
                assert!(seen.insert(i), "sample {i} twice");
            }
        }
        // The 3 samples of the dropped batch are the last 3 of this epoch's order.
        assert_eq!(seen.len(), 20);
        let order = exact.sample_order(epoch);
        assert!(order[20..].iter().all(|i| !seen.contains(i)));
    }
    // Dynamic batch sizes: partial kept, or dropped.
    let dynamic = DataLoader::new(data).batch_size(10);
    let sizes: Vec<usize> = dynamic.epoch(0).map(|b| b.len()).collect();
    assert_eq!(sizes, [10, 10, 3]);
    let sizes: Vec<usize> = dynamic.drop_last().epoch(0).map(|b| b.len()).collect();
    assert_eq!(sizes, [10, 10]);
}

#[test]
fn shuffles_differ_between_epochs_and_repeat_for_a_seed() {
    let loader = DataLoader::new(numbered(50)).batch_size(8).shuffle(42);
    let order = |l: &DataLoader, e| -> Vec<usize> { l.epoch(e).flat_map(|b| b.indices).collect() };
    let (e0, e1) = (order(&loader, 0), order(&loader, 1));
    assert_ne!(e0, e1);
    assert_ne!(e0, (0..50).collect::<Vec<_>>());
    // Epoch e's order depends only on (seed, e): a fresh loader, epochs in another order.
    let again = DataLoader::new(numbered(50)).batch_size(8).shuffle(42);
    assert_eq!(order(&again, 1), e1);
    assert_eq!(order(&again, 0), e0);
    assert_eq!(again.sample_order(0), e0);
    let other = DataLoader::new(numbered(50)).batch_size(8).shuffle(43);
    assert_ne!(order(&other, 0), e0);
    // No shuffle: dataset order.
    let plain = DataLoader::new(numbered(50)).batch_size(8);
    assert_eq!(order(&plain, 3), (0..50).collect::<Vec<_>>());
}

/// A dataset that counts `get` calls and can be made slow or to panic.
struct Probe {
    inner: Labelled,
    gets: AtomicUsize,
    delay: Duration,
    panic_at: Option<usize>,
}

impl Dataset for Probe {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn sample_dims(&self) -> &[usize] {
        self.inner.sample_dims()
    }
    fn get(&self, index: usize) -> Sample<'_> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        if self.panic_at == Some(index) {
            panic!("probe: sample {index} is unreadable");
        }
        self.inner.get(index)
    }
}

fn probe(n: usize, delay_ms: u64, panic_at: Option<usize>) -> Arc<Probe> {
    Arc::new(Probe {
        inner: numbered(n),
        gets: AtomicUsize::new(0),
        delay: Duration::from_millis(delay_ms),
        panic_at,
    })
}

#[test]
fn dropping_an_epoch_early_stops_its_thread() {
    let p = probe(1000, 1, None);
    let loader = DataLoader::new(p.clone()).batch_size(10).prefetch(2);
    let mut epoch = loader.epoch(0);
    let first = epoch.next().unwrap();
    assert_eq!(first.len(), 10);
    assert!(epoch.prefetching());
    // The thread holds one reference to the dataset while it runs.
    assert_eq!(Arc::strong_count(loader.dataset()), 2);
    let t = Instant::now();
    drop(epoch);
    assert!(t.elapsed() < Duration::from_secs(5), "drop hung");
    assert_eq!(Arc::strong_count(loader.dataset()), 1, "thread still alive");
    // Bounded work: the batch taken, the channel's 2, the one being built.
    let gets = p.gets.load(Ordering::SeqCst);
    assert!(gets <= 40, "{gets} samples read for one batch taken");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(p.gets.load(Ordering::SeqCst), gets);

    // An epoch dropped before it is read, and one read to the end.
    drop(loader.epoch(1));
    assert_eq!(Arc::strong_count(loader.dataset()), 1);
    let quick = DataLoader::new(numbered(30)).batch_size(10);
    let mut e = quick.epoch(0);
    assert_eq!(e.len(), 3);
    assert_eq!(e.by_ref().count(), 3);
    assert!(e.next().is_none());
    drop(e);
    assert_eq!(Arc::strong_count(quick.dataset()), 1);
}

#[test]
fn a_panic_on_the_prefetch_thread_reaches_the_caller() {
    let loader = DataLoader::new(probe(20, 0, Some(13))).batch_size(4);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        loader.epoch(0).count();
    }));
    let panic = result.unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("sample 13 is unreadable"), "{msg}");
    // The same without prefetch.
    let inline = loader.prefetch(0);
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inline.epoch(0).count())).is_err()
    );
}

#[test]
fn feature_shape_types_are_checked_at_construction() {
    let l = DataLoader::new(numbered(4));
    assert!(l.clone().features::<Rank2<2, 3>>().is_ok());
    assert!(l.clone().features::<(usize, Const<3>)>().is_ok());
    assert!(l.clone().features::<Rank1<6>>().is_ok());
    let e = l.clone().features::<Rank2<3, 2>>().unwrap_err();
    assert!(matches!(e, DataError::FeatureShape { ref found, .. } if found == &[2, 3]));
    assert!(l.features::<Rank1<5>>().is_err());
}

#[cfg(feature = "gpu")]
#[test]
fn gpu_batches_match_cpu_batches_while_the_gpu_computes() {
    let _gpu = crate::support::gpu_shared();
    let data = numbered(37);
    let cpu = DataLoader::new(data)
        .features::<Rank2<2, 3>>()
        .unwrap()
        .batch::<4>()
        .drop_last()
        .shuffle(5);
    let gpu = cpu.clone().device::<Gpu>().prefetch(3);
    let w = Tensor::<Rank2<3, 2>>::from_array([[1.0, -1.0], [0.5, 2.0], [-2.0, 0.25]]);
    let wg = w.to::<Gpu>();
    for epoch in 0..2 {
        let mut n = 0;
        for (c, g) in cpu.epoch(epoch).zip(gpu.epoch(epoch)) {
            let gx: Tensor<Rank3<4, 2, 3>, Gpu> = g.inputs;
            let gy: Tensor<Rank1<4>, Gpu, u32> = g.targets;
            assert_eq!(c.indices, g.indices);
            assert_eq!(c.inputs.to_vec(), gx.to_vec());
            assert_eq!(c.targets.to_vec(), gy.to_vec());
            // Kernels recorded here while the loader thread records uploads.
            let yc: Tensor<Rank3<4, 2, 2>> = c.inputs.matmul(&w).relu();
            let yg: Tensor<Rank3<4, 2, 2>, Gpu> = gx.matmul(&wg).relu();
            for (a, b) in yc.to_vec().iter().zip(yg.to_vec()) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
            n += 1;
        }
        assert_eq!(n, 9);
    }
    // A partial last batch on the GPU, and an epoch dropped halfway.
    let gpu = DataLoader::new(numbered(10)).batch_size(4).device::<Gpu>();
    let last = gpu.epoch(0).last().unwrap();
    assert_eq!(last.inputs.dims(), &[2, 6]);
    assert_eq!(last.targets.to_vec(), vec![8 % 7, 9 % 7]);
    let mut e = gpu.epoch(1);
    e.next();
    drop(e);
    assert_eq!(Arc::strong_count(gpu.dataset()), 1);
    Gpu::sync().unwrap();
}

/// Several threads upload and compute at once: the GPU context's locks keep every
/// result right.
#[cfg(feature = "gpu")]
#[test]
fn concurrent_gpu_uploads_and_kernels_are_safe() {
    let _gpu = crate::support::gpu_shared();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..30 {
                    let v: Vec<f32> = (0..257).map(|k| (t * 1000 + i * 10 + k) as f32).collect();
                    let expected: f32 = v.iter().map(|x| 2.0 * x + 1.0).sum();
                    let x = Tensor::<Rank1<257>, Gpu>::from_vec(v).unwrap();
                    let s = (x * 2.0 + 1.0).sum_all().item();
                    assert!(
                        (s - expected).abs() <= expected.abs() * 1e-5,
                        "{s} vs {expected}"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
