//! Where the bundled digits file is, found when the program runs (not fixed when it
//! was built, so a binary moved to another machine or folder does not look in the
//! build machine's tree). Shared by the main job and the examples
//! (`examples/lib.rs` includes this file).
use std::fmt;
use std::path::{Path, PathBuf};

/// The bundled dataset, relative to the repository root.
pub const BUNDLED_DIGITS: &str = "data/digits.csv.gz";

/// The bundled digits file: [`BUNDLED_DIGITS`] in the current folder or the nearest
/// folder above it (so `cargo run` and `cargo test` find it from anywhere in the
/// repository), else in the executable's folder or the nearest one above it.
pub fn find_digits() -> Result<PathBuf, NotFound> {
    let mut starts = Vec::new();
    if let Ok(dir) = std::env::current_dir() {
        starts.push(dir);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    find_from(&starts, Path::new(BUNDLED_DIGITS))
}

/// `relative` under each of `starts` and under each folder above it, in that order:
/// the first that is a file, or every path tried.
pub fn find_from(starts: &[PathBuf], relative: &Path) -> Result<PathBuf, NotFound> {
    let mut tried: Vec<PathBuf> = Vec::new();
    for start in starts {
        for dir in start.ancestors() {
            let candidate = dir.join(relative);
            if tried.contains(&candidate) {
                continue;
            }
            if candidate.is_file() {
                return Ok(candidate);
            }
            tried.push(candidate);
        }
    }
    Err(NotFound { tried })
}

/// The bundled file is in none of the places looked in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFound {
    /// Every path tried, in order.
    pub tried: Vec<PathBuf>,
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the digits dataset was not found; pass `--data PATH` (the file is \
             `{BUNDLED_DIGITS}` in Volta's repository). Looked for it at:"
        )?;
        for path in &self.tried {
            write!(f, "\n  {}", path.display())?;
        }
        Ok(())
    }
}

impl std::error::Error for NotFound {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder for one test.
    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("volta-data-path-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn finds_the_file_in_a_folder_above_the_start() {
        let root = temp("above");
        std::fs::create_dir_all(root.join("data")).unwrap();
        std::fs::write(root.join(BUNDLED_DIGITS), b"").unwrap();
        let deep = root.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        let found = find_from(&[deep], Path::new(BUNDLED_DIGITS)).unwrap();
        assert_eq!(found, root.join(BUNDLED_DIGITS));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_missing_file_names_every_path_tried_and_the_flag() {
        let root = temp("missing");
        let relative = Path::new("no-such-folder/no-such-file.csv.gz");
        let err = find_from(&[root.clone(), root.clone()], relative).unwrap_err();
        // Each folder from `root` up to the filesystem root, once.
        assert_eq!(err.tried.len(), root.ancestors().count());
        assert_eq!(err.tried[0], root.join(relative));
        let message = err.to_string();
        assert!(message.contains("--data PATH"), "{message}");
        assert!(
            message.contains(&root.join(relative).display().to_string()),
            "{message}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Run from the repository (as `cargo test` does), the committed file is found.
    #[test]
    fn finds_the_committed_file_from_the_repository() {
        let found = find_digits().expect("the committed dataset");
        assert!(found.ends_with(BUNDLED_DIGITS), "{}", found.display());
    }
}
