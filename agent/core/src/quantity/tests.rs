use proptest::prelude::*;

use super::*;

fn value(text: &str) -> i64 {
    Quantity::parse(text).unwrap().value().unwrap()
}

fn milli(text: &str) -> i64 {
    Quantity::parse(text).unwrap().milli_value().unwrap()
}

#[test]
fn decimal_suffixes() {
    assert_eq!(value("0"), 0);
    assert_eq!(value("128"), 128);
    assert_eq!(value("1k"), 1_000);
    assert_eq!(value("1M"), 1_000_000);
    assert_eq!(value("2G"), 2_000_000_000);
    assert_eq!(value("1T"), 1_000_000_000_000);
    assert_eq!(value("1P"), 1_000_000_000_000_000);
    assert_eq!(value("1E"), 1_000_000_000_000_000_000);
    assert_eq!(milli("500m"), 500);
    assert_eq!(milli("1500u"), 2, "1.5 milli rounds up");
    assert_eq!(milli("1n"), 1);
}

#[test]
fn binary_suffixes() {
    assert_eq!(value("1Ki"), 1024);
    assert_eq!(value("64Mi"), 64 << 20);
    assert_eq!(value("1Gi"), 1 << 30);
    assert_eq!(value("1.5Gi"), 3 << 29);
    assert_eq!(value("2Ti"), 2 << 40);
    assert_eq!(value("1Pi"), 1 << 50);
    assert_eq!(value("1Ei"), 1 << 60);
}

#[test]
fn exponents() {
    assert_eq!(value("1e3"), 1_000);
    assert_eq!(value("1E3"), 1_000);
    assert_eq!(value("1e+3"), 1_000);
    assert_eq!(milli("1e-3"), 1);
    assert_eq!(value("12e-1"), 2, "1.2 rounds up");
    assert_eq!(value("1.5e2"), 150);
}

#[test]
fn fractions_and_rounding() {
    assert_eq!(milli("0.1"), 100);
    assert_eq!(milli(".5"), 500);
    assert_eq!(milli("1."), 1_000);
    assert_eq!(milli("+2"), 2_000);
    assert_eq!(milli("0.0001"), 1, "a tenth of a milli rounds up to one");
    assert_eq!(value("0.5"), 1);
    assert_eq!(value("100m"), 1);
    assert_eq!(value("0.000"), 0);
    let tiny = format!("0.{}1", "0".repeat(60));
    assert_eq!(value(&tiny), 1);
}

#[test]
fn saturates_at_i64_max() {
    assert_eq!(value("100E"), i64::MAX);
    assert_eq!(milli("10E"), i64::MAX);
}

#[test]
fn rejects_malformed() {
    assert_eq!(Quantity::parse(""), Err(Error::NoNumber));
    assert_eq!(Quantity::parse("Mi"), Err(Error::NoNumber));
    assert_eq!(Quantity::parse("."), Err(Error::NoNumber));
    assert_eq!(Quantity::parse("1.2.3"), Err(Error::NoNumber));
    assert_eq!(Quantity::parse("-1"), Err(Error::Negative));
    assert_eq!(Quantity::parse("1 Mi"), Err(Error::Suffix(" Mi".to_owned())));
    assert_eq!(Quantity::parse("1mi"), Err(Error::Suffix("mi".to_owned())));
    assert_eq!(Quantity::parse("1KB"), Err(Error::Suffix("KB".to_owned())));
    assert_eq!(Quantity::parse("1e"), Err(Error::Suffix("e".to_owned())));
    assert_eq!(Quantity::parse("1e1.5"), Err(Error::Suffix("e1.5".to_owned())));
    assert_eq!(Quantity::parse("1e1000"), Err(Error::TooLarge));
    assert_eq!(Quantity::parse(&"9".repeat(40)), Err(Error::TooLarge));
    assert_eq!(Quantity::parse("1e99").unwrap().ceil_scaled(0), Err(Error::TooLarge));
}

#[test]
fn zero() {
    assert!(Quantity::parse("0m").unwrap().is_zero());
    assert!(!Quantity::parse("1n").unwrap().is_zero());
}

proptest! {
    /// An integer with a decimal suffix is that integer times the suffix's power of ten.
    #[test]
    fn integers_scale_exactly(n in 0u32..1_000_000, suffix in 0usize..4) {
        let (text, factor) = [("", 1i64), ("k", 1_000), ("M", 1_000_000), ("G", 1_000_000_000)][suffix];
        prop_assert_eq!(value(&format!("{n}{text}")), i64::from(n) * factor);
        prop_assert_eq!(value(&format!("{n}e{}", factor.ilog10())), i64::from(n) * factor);
    }

    /// Milli-units round up: `n` thousandths plus a sliver is `n + 1`.
    #[test]
    fn milli_rounds_up(n in 0u32..1_000_000) {
        prop_assert_eq!(milli(&format!("{n}m")), i64::from(n));
        prop_assert_eq!(milli(&format!("{n}.001m")), i64::from(n) + 1);
    }
}
