//! CRC-32 as in IEEE 802.3, zlib and `cksum -o 3` (reflected polynomial 0xEDB88320, initial
//! value and final XOR 0xFFFFFFFF), with a table built at compile time.

const POLY: u32 = 0xedb8_8320;

const fn make_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u32; 256] = make_table();

/// How bytes are added to a running CRC register (the value before the final XOR): [`table`]
/// here, or a CPU's CRC32 instructions (`rt::crc`), which divide by the same reflected
/// polynomial; an engine must give exactly what the table gives for any split of the input.
pub type Engine = fn(u32, &[u8]) -> u32;

/// The portable engine: one table look-up per byte.
pub fn table(mut state: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        state = TABLE[((state ^ u32::from(b)) & 0xff) as usize] ^ (state >> 8);
    }
    state
}

/// A running CRC-32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32(u32);

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// An empty CRC.
    pub const fn new() -> Self {
        Crc32(0xffff_ffff)
    }

    /// Adds one byte.
    #[inline]
    pub fn byte(&mut self, b: u8) {
        self.0 = TABLE[((self.0 ^ u32::from(b)) & 0xff) as usize] ^ (self.0 >> 8);
    }

    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.update_with(bytes, table);
    }

    /// Adds bytes with `engine`.
    pub fn update_with(&mut self, bytes: &[u8], engine: Engine) {
        self.0 = engine(self.0, bytes);
    }

    /// The CRC of everything added so far.
    pub const fn value(&self) -> u32 {
        !self.0
    }
}

/// CRC-32 of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The check value of CRC-32/ISO-HDLC, and two more from zlib's crc32().
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"The quick brown fox jumps over the lazy dog"), 0x414f_a339);
    }

    #[test]
    fn incremental_equals_whole() {
        let data: [u8; 1000] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let mut c = Crc32::new();
        for chunk in data.chunks(37) {
            c.update(chunk);
        }
        assert_eq!(c.value(), crc32(&data));
    }

    #[test]
    fn one_flipped_bit_changes_it() {
        let mut data = [0x5au8; 4096];
        let good = crc32(&data);
        data[1234] ^= 0x10;
        assert_ne!(crc32(&data), good);
    }
}
