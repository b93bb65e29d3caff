//! A paused session as bytes: a fixed header (magic, format version, compression, the
//! body's length), the zstd-compressed body (`body.rs`), and a SHA-256 over all of it.
//!
//! The hash catches damage and truncation before anything is decompressed or parsed. It
//! proves nothing about who wrote the blob: a store that hands blobs back from untrusted
//! places must authenticate them itself (an HMAC under its own key). Resuming is safe
//! whatever the bytes say: every field is checked against the image before it is used.

use std::io::Read;

use sha2::{Digest, Sha256};

use super::body;
use super::error::BlobError;
use super::state::PausedSession;

/// The first bytes of every paused session.
const MAGIC: &[u8; 8] = b"CRDNPAUS";
/// The format this build writes and reads.
pub(crate) const FORMAT: u16 = 1;
/// Magic, format, compression, reserved byte, body length, stored length.
const HEADER: usize = 8 + 2 + 1 + 1 + 8 + 8;
const HASH: usize = 32;
const COMPRESSION_ZSTD: u8 = 1;
/// zstd's fast end: compression is on the pause path, and a pandas session's changed
/// pages already shrink to a ninth of the size budget at this level (`docs/benchmarks.md`).
const ZSTD_LEVEL: i32 = 1;
/// The largest body read: a 4 GiB memory (wasm32's most) and as much again of files.
const MAX_BODY: u64 = 8 << 30;

impl PausedSession {
    /// The paused session as self-describing bytes (format 1, see `docs/sandbox.md`), compressed and
    /// hashed.
    pub fn to_bytes(&self) -> Vec<u8> {
        let body = body::encode(self);
        // Compressing into memory cannot fail; a failure would be a zstd defect, and the
        // body is then stored as it is.
        let (compression, stored) = match zstd::bulk::compress(&body, ZSTD_LEVEL) {
            Ok(compressed) => (COMPRESSION_ZSTD, compressed),
            Err(_) => (0, body.clone()),
        };
        let mut out = Vec::with_capacity(HEADER + stored.len() + HASH);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.push(compression);
        out.push(0);
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&(stored.len() as u64).to_le_bytes());
        out.extend_from_slice(&stored);
        let hash = Sha256::digest(&out);
        out.extend_from_slice(&hash);
        out
    }

    /// Reads bytes written by [`Self::to_bytes`], refusing anything else with a
    /// [`BlobError`] (never a panic).
    pub fn from_bytes(bytes: &[u8]) -> Result<PausedSession, BlobError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(BlobError::NotABlob);
        }
        if bytes.len() < HEADER + HASH {
            return Err(BlobError::Truncated);
        }
        let format = u16::from_le_bytes([bytes[8], bytes[9]]);
        if format != FORMAT {
            return Err(BlobError::UnsupportedVersion(format, FORMAT));
        }
        let field = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(word)
        };
        let (body_len, stored_len) = (field(12), field(20));
        let expected = u64::try_from(HEADER + HASH)
            .ok()
            .and_then(|fixed| fixed.checked_add(stored_len));
        if expected != Some(bytes.len() as u64) {
            return Err(BlobError::Truncated);
        }
        let (content, hash) = bytes.split_at(bytes.len() - HASH);
        if Sha256::digest(content).as_slice() != hash {
            return Err(BlobError::Corrupted);
        }
        if body_len > MAX_BODY {
            return Err(BlobError::Malformed(format!(
                "a body of {body_len} bytes is larger than any session"
            )));
        }
        let stored = &content[HEADER..];
        let body = match bytes[10] {
            0 => stored.to_vec(),
            COMPRESSION_ZSTD => inflate(stored, body_len)?,
            other => return Err(BlobError::Malformed(format!("compression {other}"))),
        };
        if body.len() as u64 != body_len {
            return Err(BlobError::Malformed(
                "the body's length is not the one the header gives".into(),
            ));
        }
        body::decode(&body)
    }
}

/// Decompresses `stored`, allocating as the output arrives and stopping past `body_len`
/// (a header that claims a small body cannot make it inflate a large one).
fn inflate(stored: &[u8], body_len: u64) -> Result<Vec<u8>, BlobError> {
    let decoder = zstd::stream::read::Decoder::with_buffer(stored)
        .map_err(|error| BlobError::Malformed(format!("compressed body: {error}")))?;
    // Reserved ahead only as far as the stored bytes could plausibly inflate.
    let expected = body_len.min(stored.len() as u64 * 64);
    let mut body = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    decoder
        .take(body_len.saturating_add(1))
        .read_to_end(&mut body)
        .map_err(|error| BlobError::Malformed(format!("compressed body: {error}")))?;
    Ok(body)
}
