//! N3: SPDY header blocks, uncompressed and through the connection's zlib streams with
//! the draft's dictionary, checked against blocks another zlib wrote.

use proptest::prelude::*;

use super::*;
use crate::spdy::dictionary;

/// Two blocks of one zlib stream, as a SPDY/3 peer (CPython's zlib, level 9, the
/// dictionary set) writes a port-forward pair's error and data stream headers.
const FIRST: [u8; 30] = [
    0x78, 0xf9, 0xe3, 0xc6, 0xa7, 0xc2, 0x02, 0xa6, 0x23, 0x46, 0x70, 0x3a, 0x2b, 0x29, 0x4a, 0x4d,
    0xcc, 0x85, 0x16, 0x25, 0xac, 0xa9, 0xa0, 0x80, 0x06, 0x00, 0x00, 0x00, 0xff, 0xff,
];
const SECOND: [u8; 36] = [
    0x02, 0xa5, 0x47, 0x48, 0xd1, 0x5c, 0x04, 0xce, 0x05, 0x16, 0x06, 0x16, 0x06, 0x40, 0x9a, 0xb3,
    0x08, 0x12, 0x95, 0x99, 0xa0, 0x24, 0xce, 0x68, 0x80, 0xa1, 0x19, 0x54, 0x0e, 0x25, 0x02, 0x00,
    0x00, 0x00, 0xff, 0xff,
];

/// N3: the dictionary is the draft's: 1423 bytes, its Adler-32 the DICTID that the
/// blocks of other SPDY/3 implementations carry.
#[test]
fn n3_dictionary_is_the_drafts() {
    assert_eq!(dictionary::LEN, 1423);
    assert!(dictionary::DICTIONARY.starts_with(b"\0\0\0\x07options\0\0\0\x04head"));
    assert!(dictionary::DICTIONARY.ends_with(b"utf-,*,enq=0."));
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &dictionary::DICTIONARY {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!((b << 16) | a, dictionary::ADLER32);
    assert_eq!(FIRST[2..6], dictionary::ADLER32.to_be_bytes());
}

/// N3: blocks another zlib compressed with the dictionary, one stream across frames,
/// inflate to their pairs.
#[test]
fn n3_inflates_another_implementations_blocks() {
    let mut inflater = Inflater::default();
    let first = inflater.inflate(&FIRST).unwrap();
    assert_eq!(first, Headers::from([("streamtype", "error")]));
    let second = inflater.inflate(&SECOND).unwrap();
    assert_eq!(second.get("Port"), Some("8080"));
    assert_eq!(second.get("requestID"), Some("0"));
    assert_eq!(second.get("streamType"), Some("data"));
    // The second block alone is not a zlib stream: the state runs across blocks.
    assert!(Inflater::default().inflate(&SECOND).is_err());
}

/// N3: names go out lowercase; several values are one NUL-separated value.
#[test]
fn n3_header_blocks_layout() {
    let headers = Headers::from([("streamType", "stdin"), ("x", "a\0b")]);
    let block = headers.encode();
    assert_eq!(&block[..8], &[0, 0, 0, 2, 0, 0, 0, 10]);
    assert_eq!(&block[8..18], b"streamtype");
    let back = Headers::decode(&block).unwrap();
    assert_eq!(back.get("STREAMTYPE"), Some("stdin"));
    assert_eq!(back.get("x"), Some("a"));
    assert_eq!(back.get("missing"), None);
}

/// N3: malformed blocks are refused with what is wrong.
#[test]
fn n3_malformed_header_blocks_are_refused() {
    let pair = |name: &str, value: &str| {
        let mut out = (name.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
        out
    };
    let block = |count: u32, pairs: &[Vec<u8>]| {
        let mut out = count.to_be_bytes().to_vec();
        pairs.iter().for_each(|p| out.extend_from_slice(p));
        out
    };
    assert_eq!(Headers::decode(&[0, 0]), Err(Error::Truncated));
    assert_eq!(Headers::decode(&block(2, &[pair("a", "b")])), Err(Error::Truncated));
    assert_eq!(Headers::decode(&block(u32::MAX, &[])), Err(Error::Truncated));
    assert_eq!(Headers::decode(&block(0, &[pair("a", "b")])), Err(Error::Trailing(10)));
    assert_eq!(Headers::decode(&block(1, &[pair("", "b")])), Err(Error::EmptyName));
    assert_eq!(
        Headers::decode(&block(1, &[pair("Port", "1")])),
        Err(Error::Uppercase("Port".into()))
    );
    assert_eq!(
        Headers::decode(&block(2, &[pair("a", "1"), pair("a", "2")])),
        Err(Error::Duplicate("a".into()))
    );
    let mut bad = block(1, &[pair("a", "b")]);
    *bad.last_mut().unwrap() = 0xff;
    assert_eq!(Headers::decode(&bad), Err(Error::NotUtf8));
    assert!(matches!(Inflater::default().inflate(b"not zlib"), Err(Error::Zlib(_))));
}

/// N3: a block that inflates past the limit is refused (a zlib bomb stops there).
#[test]
fn n3_inflating_stops_at_the_limit() {
    let mut deflater = Deflater::new();
    let compressed = deflater.deflate_raw(&vec![b'a'; 10_000]);
    assert!(compressed.len() < 200);
    let mut inflater = Inflater::new(4096);
    assert_eq!(inflater.inflate_raw(&compressed), Err(Error::TooLarge { limit: 4096 }));
    assert_eq!(Inflater::new(10_000 + 1).inflate_raw(&compressed).map(|b| b.len()), Ok(10_000));
}

proptest! {
    /// N3: any headers, deflated one block after another on one stream, inflate back on
    /// the peer's stream in the same order.
    #[test]
    fn n3_header_blocks_round_trip(
        blocks in proptest::collection::vec(
            proptest::collection::btree_map("[a-z][a-z0-9-]{0,12}", "[ -~]{0,40}", 0..6), 1..5)
    ) {
        let mut deflater = Deflater::new();
        let mut inflater = Inflater::default();
        for pairs in blocks {
            let headers = Headers(pairs.into_iter().collect());
            let compressed = deflater.deflate(&headers);
            prop_assert_eq!(inflater.inflate(&compressed), Ok(headers));
        }
    }

    /// N3: any bytes as a block inflate or fail, never panic.
    #[test]
    fn n3_any_bytes_as_a_header_block(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = Headers::decode(&bytes);
        let _ = Inflater::default().inflate(&bytes);
    }
}
