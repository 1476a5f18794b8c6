//! File readers with typed errors ([`DataError`]): the bundled UCI digits CSV,
//! MNIST-style IDX files and generic numeric CSV. Each reads gzip'd or plain files
//! (told apart by the gzip magic bytes), checks every size a header states against
//! the bytes actually present before allocating for it, and names the file, and
//! the line, column or byte offset, in each error.
use super::error::DataError;
use flate2::read::MultiGzDecoder;
use std::io::Read;
use std::path::Path;

pub mod csv;
pub mod digits;
pub mod idx;

/// The first two bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The bytes of the file at `path`, decompressed when it starts with the gzip
/// magic. The buffer grows with the data actually read, never with a size the file
/// claims.
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>, DataError> {
    let raw = std::fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    unpack(path, raw)
}

/// `raw` as it is, or decompressed when it starts with gzip's magic bytes; `path`
/// names the file in errors.
pub(crate) fn unpack(path: &Path, raw: Vec<u8>) -> Result<Vec<u8>, DataError> {
    if !raw.starts_with(&GZIP_MAGIC) {
        return Ok(raw);
    }
    let mut out = Vec::new();
    MultiGzDecoder::new(&raw[..])
        .read_to_end(&mut out)
        .map_err(|source| DataError::Gzip {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(out)
}
