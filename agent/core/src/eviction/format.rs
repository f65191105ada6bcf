//! Integer quantities printed in Kubernetes' canonical form, as kubelet's eviction
//! messages print them: bytes with binary suffixes (`100Mi`, `43008Ki`, `1536`), counts
//! with decimal ones (`5k`, `32768`).

/// `value` bytes as `resource.NewQuantity(value, BinarySI).String()` prints them: the
/// largest binary suffix that divides it exactly; below 1024 in magnitude, as a count.
pub fn bytes(value: i64) -> String {
    if value.unsigned_abs() < 1024 {
        return count(value);
    }
    scaled(value, 1024, &["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
}

/// `value` as `resource.NewQuantity(value, DecimalSI).String()` prints it: the largest
/// decimal suffix that divides it exactly.
pub fn count(value: i64) -> String {
    scaled(value, 1000, &["", "k", "M", "G", "T", "P", "E"])
}

fn scaled(value: i64, base: u64, suffixes: &[&str]) -> String {
    let sign = if value < 0 { "-" } else { "" };
    let mut magnitude = value.unsigned_abs();
    let mut index = 0;
    while magnitude != 0 && magnitude.is_multiple_of(base) && index + 1 < suffixes.len() {
        magnitude /= base;
        index += 1;
    }
    format!("{sign}{magnitude}{}", suffixes[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_take_the_largest_exact_binary_suffix() {
        assert_eq!(bytes(100 * 1024 * 1024), "100Mi");
        assert_eq!(bytes(42 * 1024 * 1024), "42Mi");
        assert_eq!(bytes(43_008 * 1024 + 1024), "43009Ki");
        assert_eq!(bytes(1536), "1536");
        assert_eq!(bytes(2048), "2Ki");
        assert_eq!(bytes(1 << 30), "1Gi");
        assert_eq!(bytes(0), "0");
        assert_eq!(bytes(-(5 << 20)), "-5Mi");
        assert_eq!(bytes(i64::MIN), "-8Ei");
    }

    #[test]
    fn bytes_below_1024_are_printed_as_counts() {
        assert_eq!(bytes(1000), "1k");
        assert_eq!(bytes(999), "999");
        assert_eq!(bytes(-1000), "-1k");
    }

    #[test]
    fn counts_take_the_largest_exact_decimal_suffix() {
        assert_eq!(count(5000), "5k");
        assert_eq!(count(32_768), "32768");
        assert_eq!(count(4_000_000), "4M");
        assert_eq!(count(0), "0");
        assert_eq!(count(-3000), "-3k");
    }
}
