//! The UCI optical digits dataset (`data/digits.csv.gz`): 8×8 images of pixels in
//! `0..=16`, one image per line as 64 pixel columns followed by the label `0..=9`.
use flate2::read::GzDecoder;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use volta::Rng;

/// Pixels per image.
pub const PIXELS: usize = 64;
/// Number of classes (digits 0–9).
pub const CLASSES: usize = 10;
/// The largest pixel value in the file.
const MAX_PIXEL: u32 = 16;

/// Why the digits file could not be loaded.
#[derive(Debug)]
pub enum DatasetError {
    /// The file could not be opened, read or decompressed.
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// A line has the wrong number of comma-separated columns.
    ColumnCount {
        /// 1-based line number.
        line: usize,
        /// Columns found.
        found: usize,
    },
    /// A column is not a non-negative integer.
    BadNumber {
        /// 1-based line number.
        line: usize,
        /// 1-based column number.
        column: usize,
        /// The text found.
        text: String,
    },
    /// A pixel above 16 or a label above 9.
    OutOfRange {
        /// 1-based line number.
        line: usize,
        /// 1-based column number.
        column: usize,
        /// The value found.
        value: u32,
        /// The largest allowed value.
        max: u32,
    },
    /// The file holds no rows.
    Empty,
}

impl fmt::Display for DatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetError::Io { path, source } => {
                write!(f, "cannot read digits data {}: {source}", path.display())
            }
            DatasetError::ColumnCount { line, found } => write!(
                f,
                "line {line}: {found} columns, expected {} ({PIXELS} pixels and a label)",
                PIXELS + 1
            ),
            DatasetError::BadNumber { line, column, text } => write!(
                f,
                "line {line}, column {column}: `{text}` is not a non-negative integer"
            ),
            DatasetError::OutOfRange {
                line,
                column,
                value,
                max,
            } => write!(f, "line {line}, column {column}: {value} exceeds {max}"),
            DatasetError::Empty => write!(f, "the digits file holds no rows"),
        }
    }
}

impl std::error::Error for DatasetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DatasetError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Labelled images, pixels scaled to `[0, 1]`.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    /// Row-major `len × PIXELS` pixels.
    pub pixels: Vec<f32>,
    /// One label in `0..CLASSES` per image.
    pub labels: Vec<u32>,
}

impl Dataset {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The images at `indices`, in that order.
    pub fn select(&self, indices: &[usize]) -> Dataset {
        let mut out = Dataset::default();
        for &i in indices {
            out.pixels
                .extend_from_slice(&self.pixels[i * PIXELS..(i + 1) * PIXELS]);
            out.labels.push(self.labels[i]);
        }
        out
    }

    /// Shuffles with `rng` and splits off `test_fraction` of the images as a test set:
    /// `(train, test)`.
    pub fn split(&self, test_fraction: f64, rng: &mut Rng) -> (Dataset, Dataset) {
        let mut order: Vec<usize> = (0..self.len()).collect();
        rng.shuffle(&mut order);
        let n_test = (self.len() as f64 * test_fraction).round() as usize;
        let (test, train) = order.split_at(n_test);
        (self.select(train), self.select(test))
    }
}

/// The committed dataset: `data/digits.csv.gz` at the repository root.
pub fn default_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/digits.csv.gz")
}

/// Loads and decompresses the gzip'd CSV at `path`.
pub fn load(path: &Path) -> Result<Dataset, DatasetError> {
    let io_err = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    parse(BufReader::new(GzDecoder::new(file))).map_err(|e| match e {
        DatasetError::Io { source, .. } => io_err(source),
        other => other,
    })
}

/// Parses CSV text (no header): 64 pixels `0..=16` then a label `0..=9` per line;
/// blank lines are skipped. Pixels are scaled to `[0, 1]`.
pub fn parse(reader: impl BufRead) -> Result<Dataset, DatasetError> {
    let mut data = Dataset::default();
    for (index, line) in reader.lines().enumerate() {
        let line_no = index + 1;
        let line = line.map_err(|source| DatasetError::Io {
            path: PathBuf::from("<input>"),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let columns: Vec<&str> = line.split(',').collect();
        if columns.len() != PIXELS + 1 {
            return Err(DatasetError::ColumnCount {
                line: line_no,
                found: columns.len(),
            });
        }
        for (c, text) in columns.iter().enumerate() {
            let value: u32 = text.trim().parse().map_err(|_| DatasetError::BadNumber {
                line: line_no,
                column: c + 1,
                text: text.to_string(),
            })?;
            let max = if c < PIXELS {
                MAX_PIXEL
            } else {
                CLASSES as u32 - 1
            };
            if value > max {
                return Err(DatasetError::OutOfRange {
                    line: line_no,
                    column: c + 1,
                    value,
                    max,
                });
            }
            if c < PIXELS {
                data.pixels.push(value as f32 / MAX_PIXEL as f32);
            } else {
                data.labels.push(value);
            }
        }
    }
    if data.is_empty() {
        return Err(DatasetError::Empty);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pixel: &str, label: &str) -> String {
        let mut cols = vec![pixel; PIXELS];
        cols.push(label);
        cols.join(",")
    }

    #[test]
    fn parses_and_scales_rows() {
        let text = format!("{}\n\n{}\n", row("16", "3"), row("4", "0"));
        let d = parse(text.as_bytes()).expect("two valid rows");
        assert_eq!(d.labels, vec![3, 0]);
        assert_eq!(d.pixels.len(), 2 * PIXELS);
        assert_eq!((d.pixels[0], d.pixels[PIXELS]), (1.0, 0.25));
    }

    #[test]
    fn malformed_inputs_give_typed_errors() {
        let short = "1,2,3\n";
        assert!(matches!(
            parse(short.as_bytes()),
            Err(DatasetError::ColumnCount { line: 1, found: 3 })
        ));
        let bad = format!("{}\n{}\n", row("0", "1"), row("x", "1"));
        match parse(bad.as_bytes()) {
            Err(
                e @ DatasetError::BadNumber {
                    line: 2, column: 1, ..
                },
            ) => {
                assert_eq!(
                    e.to_string(),
                    "line 2, column 1: `x` is not a non-negative integer"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(row("0", "10").as_bytes()),
            Err(DatasetError::OutOfRange {
                line: 1,
                column: 65,
                value: 10,
                max: 9
            })
        ));
        assert!(matches!(parse(&b""[..]), Err(DatasetError::Empty)));
        assert!(matches!(
            load(Path::new("no/such/digits.csv.gz")),
            Err(DatasetError::Io { .. })
        ));
    }

    #[test]
    fn the_committed_file_loads() {
        let d = load(&default_path()).expect("data/digits.csv.gz is committed");
        assert_eq!(d.len(), 1797);
        assert!(d.labels.iter().all(|&l| l < CLASSES as u32));
    }

    #[test]
    fn split_is_a_seeded_partition() {
        let d = Dataset {
            pixels: (0..10 * PIXELS).map(|i| (i / PIXELS) as f32).collect(),
            labels: (0..10).collect(),
        };
        let (train, test) = d.split(0.2, &mut Rng::seed(7));
        assert_eq!((train.len(), test.len()), (8, 2));
        let mut all: Vec<u32> = train.labels.iter().chain(&test.labels).copied().collect();
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        // Pixels travel with their labels.
        assert_eq!(test.pixels[0], test.labels[0] as f32);
        let (_, again) = d.split(0.2, &mut Rng::seed(7));
        assert_eq!(again.labels, test.labels);
    }
}
