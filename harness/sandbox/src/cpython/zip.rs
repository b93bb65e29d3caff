//! Just enough of the zip format to take members out of the wheel and out of the standard
//! library's zip: the central directory, stored and deflated members, no zip64 (every
//! archive read here is far below 4 GiB and 65,535 entries), no encryption.
//!
//! Names are checked before anything uses them: absolute paths, `..`, backslashes and
//! empty parts are refused, so a member can never name a place outside its folder.

use std::io::Read;

/// What can be wrong with an archive.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ZipError {
    /// The bytes are not a zip archive this reader understands.
    #[error("not a readable zip archive: {0}")]
    Malformed(&'static str),
    /// A member uses a compression method other than stored or deflated.
    #[error("member {name} uses compression method {method}")]
    Method { name: String, method: u16 },
    /// A member's name could point outside its folder.
    #[error("member name {0:?} is not a plain relative path")]
    UnsafeName(String),
    /// A member's data does not inflate to its recorded size.
    #[error("member {0} is corrupt")]
    Corrupt(String),
}

/// One member as the central directory describes it.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) name: String,
    method: u16,
    compressed_size: u64,
    size: u64,
    local_header: u64,
}

impl Member {
    /// Whether the member is a folder entry (no data).
    pub(crate) fn is_dir(&self) -> bool {
        self.name.ends_with('/')
    }
}

/// A zip archive held in memory.
pub(crate) struct Archive<'a> {
    bytes: &'a [u8],
    members: Vec<Member>,
}

fn u16_at(bytes: &[u8], at: usize) -> Result<u16, ZipError> {
    bytes
        .get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or(ZipError::Malformed("truncated"))
}

fn u32_at(bytes: &[u8], at: usize) -> Result<u32, ZipError> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(ZipError::Malformed("truncated"))
}

const END_SIGNATURE: u32 = 0x0605_4b50;
const CENTRAL_SIGNATURE: u32 = 0x0201_4b50;
const LOCAL_SIGNATURE: u32 = 0x0403_4b50;

/// Refuses names that could leave the folder they are extracted to.
pub(crate) fn check_name(name: &str) -> Result<(), ZipError> {
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    let plain = !trimmed.is_empty()
        && !trimmed.starts_with('/')
        && !trimmed.contains('\\')
        && !trimmed.contains('\0')
        && trimmed
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if plain {
        Ok(())
    } else {
        Err(ZipError::UnsafeName(name.to_owned()))
    }
}

impl<'a> Archive<'a> {
    /// Reads the central directory; every member name is checked.
    pub(crate) fn new(bytes: &'a [u8]) -> Result<Self, ZipError> {
        // The end record is in the last 64 KiB + 22 bytes (its comment is at most 64 KiB).
        let floor = bytes.len().saturating_sub(22 + 0xffff);
        let end = (floor..bytes.len().saturating_sub(21))
            .rev()
            .find(|&at| u32_at(bytes, at).is_ok_and(|sig| sig == END_SIGNATURE))
            .ok_or(ZipError::Malformed("no end of central directory"))?;
        let count = usize::from(u16_at(bytes, end + 10)?);
        let mut at = u32_at(bytes, end + 16)? as usize;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            if u32_at(bytes, at)? != CENTRAL_SIGNATURE {
                return Err(ZipError::Malformed("bad central directory entry"));
            }
            let flags = u16_at(bytes, at + 8)?;
            if flags & 1 != 0 {
                return Err(ZipError::Malformed("encrypted member"));
            }
            let method = u16_at(bytes, at + 10)?;
            let compressed_size = u64::from(u32_at(bytes, at + 20)?);
            let size = u64::from(u32_at(bytes, at + 24)?);
            let name_len = usize::from(u16_at(bytes, at + 28)?);
            let extra_len = usize::from(u16_at(bytes, at + 30)?);
            let comment_len = usize::from(u16_at(bytes, at + 32)?);
            let local_header = u64::from(u32_at(bytes, at + 42)?);
            if [compressed_size, size, local_header].contains(&0xffff_ffff) {
                return Err(ZipError::Malformed("zip64 members are not supported"));
            }
            let name = bytes
                .get(at + 46..at + 46 + name_len)
                .ok_or(ZipError::Malformed("truncated name"))?;
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| ZipError::Malformed("member name is not UTF-8"))?;
            check_name(&name)?;
            members.push(Member {
                name,
                method,
                compressed_size,
                size,
                local_header,
            });
            at += 46 + name_len + extra_len + comment_len;
        }
        Ok(Archive { bytes, members })
    }

    /// Every member, in directory order.
    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member called `name`, if any.
    pub(crate) fn find(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|member| member.name == name)
    }

    /// The member's contents, inflated and checked against its recorded size.
    pub(crate) fn read(&self, member: &Member) -> Result<Vec<u8>, ZipError> {
        let at = usize::try_from(member.local_header)
            .map_err(|_| ZipError::Malformed("offset too large"))?;
        if u32_at(self.bytes, at)? != LOCAL_SIGNATURE {
            return Err(ZipError::Malformed("bad local header"));
        }
        let name_len = usize::from(u16_at(self.bytes, at + 26)?);
        let extra_len = usize::from(u16_at(self.bytes, at + 28)?);
        let start = at + 30 + name_len + extra_len;
        let compressed_len = usize::try_from(member.compressed_size)
            .map_err(|_| ZipError::Malformed("member too large"))?;
        let data = self
            .bytes
            .get(start..start.saturating_add(compressed_len))
            .ok_or(ZipError::Malformed("member data past the end"))?;
        let size =
            usize::try_from(member.size).map_err(|_| ZipError::Malformed("member too large"))?;
        let out = match member.method {
            0 => data.to_vec(),
            8 => {
                let mut out = Vec::with_capacity(size);
                // One byte more than recorded: a member that inflates past its size is corrupt.
                flate2::read::DeflateDecoder::new(data)
                    .take(member.size + 1)
                    .read_to_end(&mut out)
                    .map_err(|_| ZipError::Corrupt(member.name.clone()))?;
                out
            }
            method => {
                return Err(ZipError::Method {
                    name: member.name.clone(),
                    method,
                });
            }
        };
        if out.len() != size {
            return Err(ZipError::Corrupt(member.name.clone()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_their_folder_are_refused() {
        for bad in ["", "/etc/passwd", "a/../../b", "..", "a//b", "a\\b", "./a"] {
            assert!(check_name(bad).is_err(), "{bad:?} must be refused");
        }
        for good in ["a", "a/b.py", "mpl-data/fonts/ttf/DejaVuSans.ttf", "dir/"] {
            assert!(check_name(good).is_ok(), "{good:?} must be accepted");
        }
    }

    #[test]
    fn garbage_is_not_an_archive() {
        assert!(Archive::new(b"").is_err());
        assert!(Archive::new(&[0u8; 100]).is_err());
    }
}
