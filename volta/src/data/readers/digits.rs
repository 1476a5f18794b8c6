//! The UCI optical digits (as bundled with scikit-learn, `data/digits.csv.gz` in
//! this repository): 8×8 grey images, one per line as 64 pixel columns in `0..=16`
//! followed by the label `0..=9`, no header. Plain or gzip'd.
use super::csv::{CsvOptions, FeatureRule, parse};
use super::{read_bytes, unpack};
use crate::data::dataset::Labelled;
use crate::data::error::DataError;
use std::path::Path;

/// Pixels per image.
pub const PIXELS: usize = 64;
/// Image side: images are `SIDE × SIDE`.
pub const SIDE: usize = 8;
/// Number of classes (digits 0–9).
pub const CLASSES: usize = 10;
/// The largest pixel value in the file.
pub const MAX_PIXEL: u32 = 16;

const PIXEL_RULE: FeatureRule = FeatureRule {
    valid: |v| v.fract() == 0.0 && (0.0..=MAX_PIXEL as f32).contains(&v),
    expected: "a pixel (an integer in 0..=16)",
    scale: 1.0 / MAX_PIXEL as f32,
    columns: Some(PIXELS + 1),
};

/// Reads the digits file at `path`: samples of dims `[1, 8, 8]` (channel, height,
/// width) with pixels scaled to `[0, 1]`, and 10 classes. Blank lines are skipped.
///
/// Errors: [`DataError::Io`], [`DataError::Gzip`], [`DataError::NotText`],
/// [`DataError::ColumnCount`] (not 65 columns), [`DataError::BadValue`] (a pixel
/// that is not an integer in `0..=16`, a label that is not an integer),
/// [`DataError::LabelOutOfRange`] (a label above 9), [`DataError::Empty`].
pub fn load(path: impl AsRef<Path>) -> Result<Labelled, DataError> {
    let path = path.as_ref();
    images(path, &read_bytes(path)?)
}

/// [`load`] from a file's bytes already in memory (plain or gzip'd): a web page
/// fetches them. `name` stands for the file in errors.
pub fn load_bytes(name: impl AsRef<Path>, bytes: &[u8]) -> Result<Labelled, DataError> {
    let name = name.as_ref();
    images(name, &unpack(name, bytes.to_vec())?)
}

fn images(path: &Path, text: &[u8]) -> Result<Labelled, DataError> {
    let data = parse(path, text, &CsvOptions::new(CLASSES), &PIXEL_RULE)?;
    Ok(data.reshape(&[1, SIDE, SIDE]).expect("64 pixels are 1×8×8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;

    fn row(pixel: &str, label: &str) -> String {
        let mut cols = vec![pixel; PIXELS];
        cols.push(label);
        cols.join(",")
    }

    fn parse_str(text: &str) -> Result<Labelled, DataError> {
        parse(
            Path::new("d.csv"),
            text.as_bytes(),
            &CsvOptions::new(CLASSES),
            &PIXEL_RULE,
        )
    }

    #[test]
    fn bytes_in_memory_read_as_the_file_does() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/digits.csv.gz");
        let from_file = load(path).unwrap();
        let bytes = std::fs::read(path).unwrap();
        let from_bytes = load_bytes("digits.csv.gz", &bytes).unwrap();
        assert_eq!(from_bytes.len(), from_file.len());
        assert_eq!(from_bytes.get(7).features, from_file.get(7).features);
        assert_eq!(from_bytes.get(7).label, from_file.get(7).label);
        let e = load_bytes("junk.csv.gz", &[0x1f, 0x8b, 0, 1]).unwrap_err();
        assert!(e.to_string().contains("junk.csv.gz"), "{e}");
    }

    #[test]
    fn parses_and_scales_rows() {
        let d = parse_str(&format!("{}\n\n{}\n", row("16", "3"), row("4", "0"))).unwrap();
        assert_eq!(d.labels(), &[3, 0]);
        assert_eq!((d.sample(0)[0], d.sample(1)[0]), (1.0, 0.25));
    }

    #[test]
    fn malformed_rows_give_typed_errors() {
        assert!(matches!(
            parse_str("1,2,3\n"),
            Err(DataError::ColumnCount {
                line: 1,
                expected: 65,
                found: 3,
                ..
            })
        ));
        let e = parse_str(&format!("{}\n{}\n", row("0", "1"), row("17", "1"))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d.csv: line 2, column 1: `17` is not a pixel (an integer in 0..=16)"
        );
        assert!(matches!(
            parse_str(&row("1.5", "1")),
            Err(DataError::BadValue { column: 1, .. })
        ));
        assert!(matches!(
            parse_str(&row("0", "10")),
            Err(DataError::LabelOutOfRange { label: 10, .. })
        ));
    }

    #[test]
    fn the_committed_file_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/digits.csv.gz");
        let d = load(&path).expect("data/digits.csv.gz is committed");
        assert_eq!(d.len(), 1797);
        assert_eq!(d.sample_dims(), &[1, 8, 8]);
        assert_eq!(d.class_counts().iter().sum::<usize>(), 1797);
        assert!(d.features().iter().all(|&p| (0.0..=1.0).contains(&p)));
    }
}
