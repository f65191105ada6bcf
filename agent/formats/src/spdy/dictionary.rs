//! The zlib dictionary every SPDY/3 header block is compressed with (draft 3, section
//! 2.6.10.1): the header names HTTP uses most, each after its length as four bytes, then
//! status codes, reason phrases, dates and common values as plain text. Its Adler-32
//! ([`ADLER32`]) is the `DICTID` of every compressed header block's zlib header.

/// The header names, in the draft's order, each written as a 32-bit length and the name.
const NAMES: [&str; 65] = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The plain text after the names.
const TAIL: [&str; 15] = [
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information",
    "204 No Content",
    "301 Moved Permanently",
    "400 Bad Request",
    "401 Unauthorized",
    "403 Forbidden",
    "404 Not Found",
    "500 Internal Server Error",
    "501 Not Implemented",
    "503 Service Unavailable",
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,",
    "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch",
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
];

/// The dictionary's length in bytes.
pub const LEN: usize = len();

/// The dictionary's Adler-32 checksum, as a compressed header block's zlib header names it.
pub const ADLER32: u32 = 0xe3c6_a7c2;

/// The dictionary.
pub static DICTIONARY: [u8; LEN] = build();

const fn len() -> usize {
    let mut total = 0;
    let mut i = 0;
    while i < NAMES.len() {
        total += 4 + NAMES[i].len();
        i += 1;
    }
    let mut i = 0;
    while i < TAIL.len() {
        total += TAIL[i].len();
        i += 1;
    }
    total
}

const fn build() -> [u8; LEN] {
    let mut out = [0u8; LEN];
    let mut at = 0;
    let mut i = 0;
    while i < NAMES.len() {
        let name = NAMES[i].as_bytes();
        let length = (name.len() as u32).to_be_bytes();
        let mut j = 0;
        while j < 4 {
            out[at] = length[j];
            at += 1;
            j += 1;
        }
        at = copy(&mut out, at, name);
        i += 1;
    }
    let mut i = 0;
    while i < TAIL.len() {
        at = copy(&mut out, at, TAIL[i].as_bytes());
        i += 1;
    }
    out
}

const fn copy(out: &mut [u8; LEN], mut at: usize, bytes: &[u8]) -> usize {
    let mut j = 0;
    while j < bytes.len() {
        out[at] = bytes[j];
        at += 1;
        j += 1;
    }
    at
}
