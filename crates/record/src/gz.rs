//! Reading a record file that may be committed gzipped: `name`, or `name.gz` beside it.

use std::path::{Path, PathBuf};

/// The text of `plain`, or of `plain` + `.gz` (decompressed) when only that one exists,
/// with the path that was read; `Ok(None)` when neither exists. An error names the file
/// it came from.
pub fn read_plain_or_gz(
    plain: &Path,
) -> Result<Option<(PathBuf, String)>, (PathBuf, std::io::Error)> {
    match std::fs::read_to_string(plain) {
        Ok(text) => return Ok(Some((plain.to_path_buf(), text))),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err((plain.to_path_buf(), e)),
        Err(_) => {}
    }
    let mut gz = plain.as_os_str().to_owned();
    gz.push(".gz");
    let gz = PathBuf::from(gz);
    let file = match std::fs::File::open(&gz) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err((gz, e)),
    };
    let mut text = String::new();
    match std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text) {
        Ok(_) => Ok(Some((gz, text))),
        Err(e) => Err((gz, e)),
    }
}
