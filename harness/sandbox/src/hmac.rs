//! HMAC-SHA256 (RFC 2104) under the cache's secret key: the tags and stamps of cached
//! images and of the CPython guest's installed files.

use sha2::{Digest, Sha256};

/// Bytes of the cache's secret key.
pub(crate) const KEY_LEN: usize = 32;

/// HMAC-SHA256 (RFC 2104) over a stream; the key is shorter than SHA-256's block.
pub(crate) struct Hmac {
    inner: Sha256,
    outer_pad: [u8; 64],
}

impl Hmac {
    pub(crate) fn new(key: &[u8; KEY_LEN]) -> Self {
        let mut inner_pad = [0x36u8; 64];
        let mut outer_pad = [0x5cu8; 64];
        for (index, byte) in key.iter().enumerate() {
            inner_pad[index] ^= byte;
            outer_pad[index] ^= byte;
        }
        let mut inner = Sha256::new();
        inner.update(inner_pad);
        Hmac { inner, outer_pad }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
    }

    pub(crate) fn finalize(self) -> [u8; 32] {
        let mut outer = Sha256::new();
        outer.update(self.outer_pad);
        outer.update(self.inner.finalize());
        outer.finalize().into()
    }
}

pub(crate) fn hmac_sha256(key: &[u8; KEY_LEN], bytes: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::new(key);
    mac.update(bytes);
    mac.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_style_vectors() {
        // HMAC-SHA256 with a 32-byte key of 0x0b and "Hi There" (RFC 4231 case 1 uses a
        // 20-byte key; this value was computed with Python's hmac module).
        let key = [0x0bu8; KEY_LEN];
        assert_eq!(
            hex::encode(hmac_sha256(&key, b"Hi There")),
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
        let mut streamed = Hmac::new(&key);
        streamed.update(b"Hi ");
        streamed.update(b"There");
        assert_eq!(streamed.finalize(), hmac_sha256(&key, b"Hi There"));
    }
}
