//! The one error type of the data pipeline: readers, datasets and loaders.
use std::fmt;
use std::io;
use std::path::PathBuf;

/// Where in a file a bad value sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// A text file: 1-based line and column.
    Line {
        /// 1-based line number (a header line counts).
        line: usize,
        /// 1-based column number.
        column: usize,
    },
    /// A binary file: the 0-based item and its byte offset in the (decompressed) file.
    Item {
        /// 0-based item index.
        index: usize,
        /// Byte offset from the start of the decompressed file.
        offset: u64,
    },
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line { line, column } => write!(f, "line {line}, column {column}"),
            Position::Item { index, offset } => write!(f, "item {index} (byte {offset})"),
        }
    }
}

/// Why data could not be read or batched. Every variant about a file names it.
#[derive(Debug)]
#[non_exhaustive]
pub enum DataError {
    /// The file could not be opened or read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The file starts with the gzip magic but does not decompress.
    Gzip {
        /// The file.
        path: PathBuf,
        /// What the decompressor said.
        source: io::Error,
    },
    /// The file holds fewer bytes than its header (or the header itself) needs.
    /// For gzip files the sizes are those of the decompressed data.
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes needed (`u64::MAX` when the header's product overflows).
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// The file holds more bytes than its header says.
    TrailingBytes {
        /// The file.
        path: PathBuf,
        /// Bytes the header accounts for.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// A binary file starts with the wrong magic number (wrong kind of file, or
    /// images and labels swapped).
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The magic number of the expected kind.
        expected: u32,
        /// The first four bytes, big-endian.
        found: u32,
    },
    /// An images file and a labels file disagree on the number of items.
    CountMismatch {
        /// The images file.
        images: PathBuf,
        /// Images it holds.
        image_count: usize,
        /// The labels file.
        labels: PathBuf,
        /// Labels it holds.
        label_count: usize,
    },
    /// A text line is not valid UTF-8.
    NotText {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// A CSV row has another number of columns than the first row (or the header).
    ColumnCount {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Columns expected.
        expected: usize,
        /// Columns found.
        found: usize,
    },
    /// A CSV field is not a number of the expected kind.
    BadValue {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// 1-based column number.
        column: usize,
        /// The text found.
        text: String,
        /// What was expected, e.g. "a number" or "an integer in 0..=16".
        expected: &'static str,
    },
    /// A label is not below the number of classes.
    LabelOutOfRange {
        /// The file.
        path: PathBuf,
        /// Where the label is.
        at: Position,
        /// The label found.
        label: u64,
        /// The number of classes (labels must be below it).
        classes: usize,
    },
    /// The file holds no samples.
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// In-memory data whose parts disagree (feature count vs labels, a label not
    /// below the class count, a reshape to another element count).
    Inconsistent {
        /// What disagrees.
        reason: String,
    },
    /// A loader's sample shape type does not fit the dataset's sample dims.
    FeatureShape {
        /// The shape the type asks for (`?` for run-time dims).
        expected: String,
        /// The dataset's sample dims.
        found: Vec<usize>,
    },
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DataError::*;
        match self {
            Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Gzip { path, source } => write!(
                f,
                "{}: starts like a gzip file but does not decompress: {source}",
                path.display()
            ),
            Truncated {
                path,
                expected,
                found,
            } => {
                let need = if *expected == u64::MAX {
                    "more than 2^64".to_string()
                } else {
                    expected.to_string()
                };
                write!(
                    f,
                    "{}: truncated: its header needs {need} bytes, the file holds {found}",
                    path.display()
                )
            }
            TrailingBytes {
                path,
                expected,
                found,
            } => write!(
                f,
                "{}: {found} bytes, but its header accounts for {expected} (trailing data)",
                path.display()
            ),
            BadMagic {
                path,
                expected,
                found,
            } => write!(
                f,
                "{}: magic number {found:#010x}, expected {expected:#010x}",
                path.display()
            ),
            CountMismatch {
                images,
                image_count,
                labels,
                label_count,
            } => write!(
                f,
                "{} holds {image_count} images but {} holds {label_count} labels",
                images.display(),
                labels.display()
            ),
            NotText { path, line } => {
                write!(f, "{}: line {line} is not UTF-8 text", path.display())
            }
            ColumnCount {
                path,
                line,
                expected,
                found,
            } => write!(
                f,
                "{}: line {line} has {found} columns, expected {expected}",
                path.display()
            ),
            BadValue {
                path,
                line,
                column,
                text,
                expected,
            } => write!(
                f,
                "{}: line {line}, column {column}: `{text}` is not {expected}",
                path.display()
            ),
            LabelOutOfRange {
                path,
                at,
                label,
                classes,
            } => write!(
                f,
                "{}: {at}: label {label} is out of range (there are {classes} classes)",
                path.display()
            ),
            Empty { path } => write!(f, "{}: holds no samples", path.display()),
            Inconsistent { reason } => write!(f, "inconsistent dataset: {reason}"),
            FeatureShape { expected, found } => write!(
                f,
                "the loader's sample shape {expected} does not fit the dataset's samples \
                 {found:?} (give the same dims, or one flat dim of the same size)"
            ),
        }
    }
}

impl std::error::Error for DataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DataError::Io { source, .. } | DataError::Gzip { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl DataError {
    /// The file the error is about, if it is about one (for a count mismatch, the
    /// images file).
    pub fn path(&self) -> Option<&std::path::Path> {
        use DataError::*;
        match self {
            Io { path, .. }
            | Gzip { path, .. }
            | Truncated { path, .. }
            | TrailingBytes { path, .. }
            | BadMagic { path, .. }
            | NotText { path, .. }
            | ColumnCount { path, .. }
            | BadValue { path, .. }
            | LabelOutOfRange { path, .. }
            | Empty { path } => Some(path),
            CountMismatch { images, .. } => Some(images),
            Inconsistent { .. } | FeatureShape { .. } => None,
        }
    }
}
