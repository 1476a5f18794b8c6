//! Generic numeric CSV: one sample per line, numeric feature columns and one
//! integer class-label column, an optional header line. Plain or gzip'd.
//!
//! ```no_run
//! use volta::data::readers::csv::{self, CsvOptions, LabelColumn};
//!
//! // iris.csv: a header, four measurements, then the class 0..3.
//! let data = csv::load("iris.csv", &CsvOptions::new(3).header(true))?;
//! // Or the label first, `;`-separated:
//! let opts = CsvOptions::new(10).label_column(LabelColumn::First).delimiter(b';');
//! # let _ = (data, opts);
//! # Ok::<(), volta::data::DataError>(())
//! ```
use super::read_bytes;
use crate::data::dataset::Labelled;
use crate::data::error::{DataError, Position};
use std::path::Path;

/// Which column holds the class label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelColumn {
    /// The first column.
    First,
    /// The last column (the default).
    Last,
    /// The column at this 0-based index.
    Index(usize),
}

/// How to read a CSV file; [`CsvOptions::new`] gives the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvOptions {
    classes: usize,
    label: LabelColumn,
    header: bool,
    delimiter: u8,
}

impl CsvOptions {
    /// Labels in `0..classes`, in the last column; no header; comma-separated.
    pub fn new(classes: usize) -> Self {
        CsvOptions {
            classes,
            label: LabelColumn::Last,
            header: false,
            delimiter: b',',
        }
    }

    /// Which column holds the label.
    pub fn label_column(mut self, column: LabelColumn) -> Self {
        self.label = column;
        self
    }

    /// Whether the first non-blank line is a header (skipped; it sets the column
    /// count every row must have).
    pub fn header(mut self, header: bool) -> Self {
        self.header = header;
        self
    }

    /// The field separator (an ASCII byte: `b','`, `b';'`, `b'\t'`).
    pub fn delimiter(mut self, delimiter: u8) -> Self {
        self.delimiter = delimiter;
        self
    }
}

/// What a feature field must hold, and how it is scaled.
pub(crate) struct FeatureRule {
    /// Whether a parsed value is allowed.
    pub valid: fn(f32) -> bool,
    /// What an allowed value is, for the error.
    pub expected: &'static str,
    /// Values are multiplied by it.
    pub scale: f32,
    /// The exact column count, when the format fixes it.
    pub columns: Option<usize>,
}

const ANY_NUMBER: FeatureRule = FeatureRule {
    valid: f32::is_finite,
    expected: "a finite number",
    scale: 1.0,
    columns: None,
};

/// Reads the CSV file at `path` into a dataset of flat samples (`[columns − 1]`
/// features each). Blank lines are skipped; fields may be padded with spaces.
///
/// Errors: [`DataError::Io`], [`DataError::Gzip`], [`DataError::NotText`],
/// [`DataError::ColumnCount`] (a row with another column count than the first row
/// or the header, or too few for the label column), [`DataError::BadValue`] (a
/// feature that is not a finite number, a label that is not a non-negative
/// integer), [`DataError::LabelOutOfRange`], [`DataError::Empty`].
pub fn load(path: impl AsRef<Path>, options: &CsvOptions) -> Result<Labelled, DataError> {
    let path = path.as_ref();
    parse(path, &read_bytes(path)?, options, &ANY_NUMBER)
}

/// Parses CSV `bytes` read from `path` (named in errors).
pub(crate) fn parse(
    path: &Path,
    bytes: &[u8],
    options: &CsvOptions,
    rule: &FeatureRule,
) -> Result<Labelled, DataError> {
    let path_buf = || path.to_path_buf();
    let mut columns = rule.columns;
    let mut header_pending = options.header;
    let mut features = Vec::new();
    let mut labels = Vec::new();
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_no = index + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = std::str::from_utf8(line).map_err(|_| DataError::NotText {
            path: path_buf(),
            line: line_no,
        })?;
        if text.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = text
            .split(options.delimiter as char)
            .map(str::trim)
            .collect();
        let expected = *columns.get_or_insert(fields.len());
        if fields.len() != expected {
            return Err(DataError::ColumnCount {
                path: path_buf(),
                line: line_no,
                expected,
                found: fields.len(),
            });
        }
        let label_at = match options.label {
            LabelColumn::First => 0,
            LabelColumn::Last => expected - 1,
            LabelColumn::Index(i) if i < expected => i,
            LabelColumn::Index(i) => {
                return Err(DataError::ColumnCount {
                    path: path_buf(),
                    line: line_no,
                    // `LabelColumn::Index(usize::MAX)` must not overflow.
                    expected: i.saturating_add(1),
                    found: fields.len(),
                });
            }
        };
        if std::mem::take(&mut header_pending) {
            continue;
        }
        for (c, field) in fields.iter().enumerate() {
            let at = Position::Line {
                line: line_no,
                column: c + 1,
            };
            let bad = |expected| DataError::BadValue {
                path: path_buf(),
                line: line_no,
                column: c + 1,
                text: field.to_string(),
                expected,
            };
            if c == label_at {
                let label: u64 = field
                    .parse()
                    .map_err(|_| bad("a class label (a non-negative integer)"))?;
                if label >= options.classes as u64 {
                    return Err(DataError::LabelOutOfRange {
                        path: path_buf(),
                        at,
                        label,
                        classes: options.classes,
                    });
                }
                labels.push(label as u32);
            } else {
                let value: f32 = field.parse().map_err(|_| bad(rule.expected))?;
                if !(rule.valid)(value) {
                    return Err(bad(rule.expected));
                }
                features.push(value * rule.scale);
            }
        }
    }
    if labels.is_empty() {
        return Err(DataError::Empty { path: path_buf() });
    }
    let width = columns.expect("a row was read") - 1;
    Ok(Labelled::new_unchecked(
        features,
        vec![width],
        labels,
        options.classes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str, options: &CsvOptions) -> Result<Labelled, DataError> {
        parse(Path::new("mem.csv"), text.as_bytes(), options, &ANY_NUMBER)
    }

    #[test]
    fn reads_headers_label_columns_and_delimiters() {
        let d = parse_str(
            "a,b,y\n1, 2.5 ,1\r\n\n-3,4e1,0\n",
            &CsvOptions::new(2).header(true),
        )
        .unwrap();
        assert_eq!(d.features(), &[1.0, 2.5, -3.0, 40.0]);
        assert_eq!(d.labels(), &[1, 0]);
        assert_eq!(d.dims(), &[2]);
        let opts = CsvOptions::new(3)
            .label_column(LabelColumn::First)
            .delimiter(b';');
        let d = parse_str("2;0.5\n1;7\n", &opts).unwrap();
        assert_eq!((d.features(), d.labels()), (&[0.5, 7.0][..], &[2, 1][..]));
        let opts = CsvOptions::new(3).label_column(LabelColumn::Index(1));
        let d = parse_str("9,2,8\n", &opts).unwrap();
        assert_eq!((d.features(), d.labels()), (&[9.0, 8.0][..], &[2][..]));
    }

    #[test]
    fn errors_name_line_and_column() {
        let o = CsvOptions::new(3);
        let e = parse_str("1,2,0\n1,2\n", &o).unwrap_err();
        assert!(matches!(
            e,
            DataError::ColumnCount {
                line: 2,
                expected: 3,
                found: 2,
                ..
            }
        ));
        assert_eq!(e.to_string(), "mem.csv: line 2 has 2 columns, expected 3");
        let e = parse_str("1,x,0\n", &o).unwrap_err();
        assert_eq!(
            e.to_string(),
            "mem.csv: line 1, column 2: `x` is not a finite number"
        );
        assert!(matches!(
            parse_str("1,nan,0\n", &o),
            Err(DataError::BadValue { column: 2, .. })
        ));
        assert!(matches!(
            parse_str("1,2,-1\n", &o),
            Err(DataError::BadValue { column: 3, .. })
        ));
        let e = parse_str("1,2,3\n", &o).unwrap_err();
        assert_eq!(
            e.to_string(),
            "mem.csv: line 1, column 3: label 3 is out of range (there are 3 classes)"
        );
        assert!(matches!(
            parse_str("x,y\n\n", &o.clone().header(true)),
            Err(DataError::Empty { .. })
        ));
        let opts = CsvOptions::new(3).label_column(LabelColumn::Index(5));
        assert!(matches!(
            parse_str("1,2\n", &opts),
            Err(DataError::ColumnCount { expected: 6, .. })
        ));
        assert!(matches!(
            parse(Path::new("m"), b"1,\xff,0\n", &o, &ANY_NUMBER),
            Err(DataError::NotText { line: 1, .. })
        ));
    }
}
