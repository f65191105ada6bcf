use super::*;

#[test]
fn short_hash_is_sha256_cut_to_16_digits() {
    // sha256("") = e3b0c44298fc1c149afbf4c8996fb924...
    assert_eq!(short_sha256(b""), "sha256:e3b0c44298fc1c14");
}
