//! Little-endian fields of a paused session's body: a writer, and a reader that checks
//! every length against the bytes left before it allocates or slices.

use super::error::BlobError;

/// Appends fields to a body.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, value: u8) {
        self.bytes.push(value);
    }

    pub(crate) fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }

    pub(crate) fn u32(&mut self, value: u32) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// A count of what follows (a length, a number of records).
    pub(crate) fn len(&mut self, value: usize) {
        self.u64(value as u64);
    }

    pub(crate) fn bytes(&mut self, value: &[u8]) {
        self.len(value.len());
        self.bytes.extend_from_slice(value);
    }

    pub(crate) fn str(&mut self, value: &str) {
        self.bytes(value.as_bytes());
    }
}

/// Reads fields from a body, every read bounded by what is left.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

pub(crate) fn malformed(what: impl Into<String>) -> BlobError {
    BlobError::Malformed(what.into())
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], BlobError> {
        if len > self.rest.len() {
            return Err(malformed(format!("{what} runs past the end")));
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], BlobError> {
        let bytes = self.take(N, what)?;
        let mut array = [0u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, BlobError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn bool(&mut self, what: &str) -> Result<bool, BlobError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(malformed(format!("{what}: {other} is not a flag"))),
        }
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, BlobError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, BlobError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of records, each at least `min_record` bytes: more than the bytes left could
    /// hold is refused before anything is reserved for them.
    pub(crate) fn count(&mut self, min_record: usize, what: &str) -> Result<usize, BlobError> {
        let count = self.u64(what)?;
        let most = self.rest.len() / min_record.max(1);
        usize::try_from(count)
            .ok()
            .filter(|count| *count <= most)
            .ok_or_else(|| malformed(format!("{what}: {count} records cannot fit")))
    }

    pub(crate) fn bytes(&mut self, what: &str) -> Result<&'a [u8], BlobError> {
        let len = self.u64(what)?;
        let len = usize::try_from(len).map_err(|_| malformed(format!("{what} is too long")))?;
        self.take(len, what)
    }

    pub(crate) fn str(&mut self, what: &str) -> Result<&'a str, BlobError> {
        std::str::from_utf8(self.bytes(what)?).map_err(|_| malformed(format!("{what}: not UTF-8")))
    }

    /// Fails unless every byte was read.
    pub(crate) fn finish(self) -> Result<(), BlobError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(malformed(format!(
                "{} bytes after the end",
                self.rest.len()
            )))
        }
    }
}
