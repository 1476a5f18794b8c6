//! MNIST-style IDX files (MNIST, Fashion-MNIST, KMNIST): an images file of `u8`
//! pixels (magic `0x00000803`, then the image count, rows and columns as big-endian
//! `u32`s) paired with a labels file (magic `0x00000801`, then the count), each
//! plain or gzip'd (`train-images-idx3-ubyte.gz`).
use super::read_bytes;
use crate::data::dataset::Labelled;
use crate::data::error::{DataError, Position};
use std::path::Path;

/// Magic number of an images file: unsigned bytes, 3 dims.
pub const IMAGES_MAGIC: u32 = 0x0000_0803;
/// Magic number of a labels file: unsigned bytes, 1 dim.
pub const LABELS_MAGIC: u32 = 0x0000_0801;

/// Reads an images file and its labels file into a dataset of samples of dims
/// `[1, rows, cols]`, pixels scaled from `0..=255` to `[0, 1]`, labels in
/// `0..classes` (10 for MNIST and Fashion-MNIST).
///
/// Every size in a header is checked against the bytes of the (decompressed) file
/// before anything is allocated for it.
///
/// Errors: [`DataError::Io`], [`DataError::Gzip`], [`DataError::BadMagic`],
/// [`DataError::Truncated`] (shorter than the header says, or than a header),
/// [`DataError::TrailingBytes`], [`DataError::Empty`] (no images),
/// [`DataError::CountMismatch`], [`DataError::LabelOutOfRange`].
pub fn load(
    images: impl AsRef<Path>,
    labels: impl AsRef<Path>,
    classes: usize,
) -> Result<Labelled, DataError> {
    let (images, labels) = (images.as_ref(), labels.as_ref());
    let image_bytes = read_bytes(images)?;
    let (count, rows, cols) = image_header(images, &image_bytes)?;
    let label_bytes = read_bytes(labels)?;
    let label_count = label_header(labels, &label_bytes)?;
    if label_count != count {
        return Err(DataError::CountMismatch {
            images: images.to_path_buf(),
            image_count: count,
            labels: labels.to_path_buf(),
            label_count,
        });
    }
    let mut out_labels = Vec::with_capacity(count);
    for (index, &l) in label_bytes[8..].iter().enumerate() {
        if l as usize >= classes {
            return Err(DataError::LabelOutOfRange {
                path: labels.to_path_buf(),
                at: Position::Item {
                    index,
                    offset: 8 + index as u64,
                },
                label: l.into(),
                classes,
            });
        }
        out_labels.push(l.into());
    }
    let features = image_bytes[16..]
        .iter()
        .map(|&p| f32::from(p) / 255.0)
        .collect();
    Ok(Labelled::new_unchecked(
        features,
        vec![1, rows, cols],
        out_labels,
        classes,
    ))
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Checks the magic, then that the file holds exactly `header + body` bytes.
fn check(
    path: &Path,
    bytes: &[u8],
    magic: u32,
    header: u64,
    body: Option<u64>,
) -> Result<(), DataError> {
    let found = bytes.len() as u64;
    if found < 4 {
        return Err(DataError::Truncated {
            path: path.to_path_buf(),
            expected: header,
            found,
        });
    }
    if be_u32(bytes, 0) != magic {
        return Err(DataError::BadMagic {
            path: path.to_path_buf(),
            expected: magic,
            found: be_u32(bytes, 0),
        });
    }
    if found < header {
        return Err(DataError::Truncated {
            path: path.to_path_buf(),
            expected: header,
            found,
        });
    }
    let Some(body) = body else { return Ok(()) };
    let expected = body.saturating_add(header);
    if found < expected {
        return Err(DataError::Truncated {
            path: path.to_path_buf(),
            expected,
            found,
        });
    }
    if found > expected {
        return Err(DataError::TrailingBytes {
            path: path.to_path_buf(),
            expected,
            found,
        });
    }
    Ok(())
}

/// `(count, rows, cols)` of an images file whose size matches its header.
fn image_header(path: &Path, bytes: &[u8]) -> Result<(usize, usize, usize), DataError> {
    check(path, bytes, IMAGES_MAGIC, 16, None)?;
    let [n, r, c] = [4, 8, 12].map(|at| u64::from(be_u32(bytes, at)));
    let body = n
        .checked_mul(r)
        .and_then(|x| x.checked_mul(c))
        .unwrap_or(u64::MAX);
    check(path, bytes, IMAGES_MAGIC, 16, Some(body))?;
    if n == 0 {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
        });
    }
    // The body fits in memory, so each factor fits in usize.
    Ok((n as usize, r as usize, c as usize))
}

/// The count of a labels file whose size matches its header.
fn label_header(path: &Path, bytes: &[u8]) -> Result<usize, DataError> {
    check(path, bytes, LABELS_MAGIC, 8, None)?;
    let n = u64::from(be_u32(bytes, 4));
    check(path, bytes, LABELS_MAGIC, 8, Some(n))?;
    Ok(n as usize)
}
