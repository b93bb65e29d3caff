//! Just enough of the tar format to take files out of a Python sdist: ustar headers, the
//! pax extended headers Python's `tarfile` writes (`path`, `size`), regular files and
//! folders; links and devices are skipped.
//!
//! Names are checked before anything uses them: absolute paths, `..`, backslashes and
//! empty parts are refused, so a member can never name a place outside its folder.

/// Why an archive could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TarError {
    /// The bytes are not a tar archive this reader understands.
    #[error("not a readable tar archive: {0}")]
    Malformed(&'static str),
    /// A member's name could point outside its folder.
    #[error("member name {0:?} is not a plain relative path")]
    UnsafeName(String),
}

/// A regular file of the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    pub path: String,
    pub data: &'a [u8],
}

const BLOCK: usize = 512;

fn field(header: &[u8], from: usize, len: usize) -> &[u8] {
    let raw = &header[from..from + len];
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    &raw[..end]
}

fn octal(header: &[u8], from: usize, len: usize) -> Result<usize, TarError> {
    let text = std::str::from_utf8(field(header, from, len))
        .map_err(|_| TarError::Malformed("a size that is not text"))?;
    let text = text.trim_matches(|c: char| c == ' ' || c == '\0');
    if text.is_empty() {
        return Ok(0);
    }
    usize::from_str_radix(text, 8).map_err(|_| TarError::Malformed("a size that is not octal"))
}

/// A pax header's records (`LEN key=value\n`): the ones this reader uses.
fn pax_records(mut data: &[u8]) -> Result<(Option<String>, Option<usize>), TarError> {
    let (mut path, mut size) = (None, None);
    while !data.is_empty() {
        let space = data
            .iter()
            .position(|&b| b == b' ')
            .ok_or(TarError::Malformed("a pax record without a length"))?;
        let len: usize = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or(TarError::Malformed("a pax record length"))?;
        if len <= space + 1 || len > data.len() {
            return Err(TarError::Malformed("a pax record length"));
        }
        let record = &data[space + 1..len - 1];
        if let Some(eq) = record.iter().position(|&b| b == b'=') {
            let value = String::from_utf8_lossy(&record[eq + 1..]).into_owned();
            match &record[..eq] {
                b"path" => path = Some(value),
                b"size" => size = value.parse().ok(),
                _ => {}
            }
        }
        data = &data[len..];
    }
    Ok((path, size))
}

/// Refuses a name that could leave its folder.
pub fn check_name(name: &str) -> Result<(), TarError> {
    let trimmed = name.trim_end_matches('/');
    if trimmed.is_empty()
        || trimmed.starts_with('/')
        || trimmed.contains('\\')
        || trimmed
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Err(TarError::UnsafeName(name.to_owned()));
    }
    Ok(())
}

/// The regular files of an (uncompressed) tar archive, in order.
pub fn files(bytes: &[u8]) -> Result<Vec<Entry<'_>>, TarError> {
    let mut out = Vec::new();
    let mut at = 0;
    let (mut next_path, mut next_size): (Option<String>, Option<usize>) = (None, None);
    while at + BLOCK <= bytes.len() {
        let header = &bytes[at..at + BLOCK];
        if header.iter().all(|&b| b == 0) {
            return Ok(out);
        }
        let size = match next_size.take() {
            Some(size) => size,
            None => octal(header, 124, 12)?,
        };
        let kind = header[156];
        let start = at + BLOCK;
        let end = start
            .checked_add(size)
            .filter(|&end| end <= bytes.len())
            .ok_or(TarError::Malformed("a member runs past the end"))?;
        let data = &bytes[start..end];
        at = start + size.div_ceil(BLOCK) * BLOCK;
        match kind {
            b'x' => {
                let (path, size) = pax_records(data)?;
                next_path = path;
                next_size = size;
                continue;
            }
            b'g' => continue,
            _ => {}
        }
        let path = match next_path.take() {
            Some(path) => path,
            None => {
                let name = String::from_utf8_lossy(field(header, 0, 100)).into_owned();
                let prefix = if &header[257..262] == b"ustar" {
                    String::from_utf8_lossy(field(header, 345, 155)).into_owned()
                } else {
                    String::new()
                };
                if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                }
            }
        };
        if kind == b'0' || kind == 0 {
            check_name(&path)?;
            out.push(Entry { path, data });
        }
    }
    Err(TarError::Malformed("no end-of-archive marker"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, size: usize, kind: u8) -> Vec<u8> {
        let mut h = vec![0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{size:011o}");
        h[124..135].copy_from_slice(size.as_bytes());
        h[156] = kind;
        h[257..262].copy_from_slice(b"ustar");
        h
    }

    fn member(out: &mut Vec<u8>, name: &str, data: &[u8], kind: u8) {
        out.extend(header(name, data.len(), kind));
        out.extend(data);
        out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
    }

    #[test]
    fn files_and_pax_paths_are_read_and_folders_skipped() {
        let mut tar = Vec::new();
        member(&mut tar, "pkg/", b"", b'5');
        member(&mut tar, "pkg/a.txt", b"hello", b'0');
        let long = format!("pkg/{}/b.txt", "d".repeat(120));
        let record = format!(" path={long}\n");
        let record = format!("{}{record}", record.len() + 3);
        member(&mut tar, "PaxHeader", record.as_bytes(), b'x');
        member(&mut tar, "pkg/short", b"bb", b'0');
        tar.extend(vec![0u8; 2 * BLOCK]);
        let files = files(&tar).unwrap();
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(
            (files[0].path.as_str(), files[0].data),
            ("pkg/a.txt", &b"hello"[..])
        );
        assert_eq!(
            (files[1].path.as_str(), files[1].data),
            (long.as_str(), &b"bb"[..])
        );
    }

    #[test]
    fn names_that_could_leave_their_folder_and_truncated_archives_are_refused() {
        let mut tar = Vec::new();
        member(&mut tar, "pkg/../../etc/passwd", b"x", b'0');
        tar.extend(vec![0u8; 2 * BLOCK]);
        assert!(matches!(files(&tar), Err(TarError::UnsafeName(_))));
        let mut tar = Vec::new();
        member(&mut tar, "pkg/a", &[1u8; 600], b'0');
        tar.truncate(BLOCK + 100);
        assert!(matches!(files(&tar), Err(TarError::Malformed(_))));
        assert!(matches!(files(b"garbage"), Err(TarError::Malformed(_))));
    }
}
