//! S12: go-yaml v2's resolver, a table drawn from its resolve.go and Go's strconv.

use super::{Scalar, Tag, plain, tagged};

#[test]
fn s12_plain_scalars_resolve_as_go_yaml_resolves_them() {
    let table: &[(&str, Scalar)] = &[
        // Nulls.
        ("", Scalar::Null),
        ("~", Scalar::Null),
        ("null", Scalar::Null),
        ("Null", Scalar::Null),
        ("NULL", Scalar::Null),
        ("nULL", Scalar::Str),
        // YAML 1.1 booleans, in the three spellings go-yaml takes.
        ("yes", Scalar::Bool(true)),
        ("Yes", Scalar::Bool(true)),
        ("YES", Scalar::Bool(true)),
        ("y", Scalar::Bool(true)),
        ("Y", Scalar::Bool(true)),
        ("on", Scalar::Bool(true)),
        ("ON", Scalar::Bool(true)),
        ("true", Scalar::Bool(true)),
        ("True", Scalar::Bool(true)),
        ("no", Scalar::Bool(false)),
        ("N", Scalar::Bool(false)),
        ("off", Scalar::Bool(false)),
        ("Off", Scalar::Bool(false)),
        ("FALSE", Scalar::Bool(false)),
        ("yEs", Scalar::Str),
        ("tRUE", Scalar::Str),
        // Integers: decimal, YAML 1.1 octal, 0o, 0x, 0b, signs, `_` separators.
        ("0", Scalar::Int(0)),
        ("420", Scalar::Int(420)),
        ("0644", Scalar::Int(420)),
        ("01777", Scalar::Int(1023)),
        ("0400", Scalar::Int(256)),
        ("-0644", Scalar::Int(-420)),
        ("+0644", Scalar::Int(420)),
        ("0o644", Scalar::Int(420)),
        ("0x1F", Scalar::Int(31)),
        ("-0x10", Scalar::Int(-16)),
        ("0b101", Scalar::Int(5)),
        ("-0b101", Scalar::Int(-5)),
        ("1_000", Scalar::Int(1000)),
        ("0x_FF", Scalar::Int(255)),
        ("+12", Scalar::Int(12)),
        ("9223372036854775807", Scalar::Int(i64::MAX)),
        ("-9223372036854775808", Scalar::Int(i64::MIN)),
        ("9223372036854775808", Scalar::Uint(9_223_372_036_854_775_808)),
        ("18446744073709551615", Scalar::Uint(u64::MAX)),
        ("18446744073709551616", Scalar::Float(18_446_744_073_709_551_616.0)),
        // `08` is not octal: go-yaml falls through to its float pattern.
        ("08", Scalar::Float(8.0)),
        ("0x", Scalar::Str),
        ("0xG", Scalar::Str),
        // Floats.
        ("1.5", Scalar::Float(1.5)),
        (".5", Scalar::Float(0.5)),
        ("-.5", Scalar::Float(-0.5)),
        ("1.", Scalar::Float(1.0)),
        ("1e3", Scalar::Float(1000.0)),
        ("1E+3", Scalar::Float(1000.0)),
        ("6.02e-23", Scalar::Float(6.02e-23)),
        ("1_000.5", Scalar::Float(1000.5)),
        ("1e400", Scalar::Str),
        ("1e", Scalar::Str),
        ("1.2.3", Scalar::Str),
        (".", Scalar::Str),
        // Strings that look like numbers to other parsers.
        ("1:30", Scalar::Str),
        ("2001-12-14", Scalar::Str),
        ("2001-12-14t21:59:43.10-05:00", Scalar::Str),
        ("0.0.0.0", Scalar::Str),
        ("1Gi", Scalar::Str),
        ("500m", Scalar::Str),
        ("-", Scalar::Str),
        ("+", Scalar::Str),
        ("inf", Scalar::Str),
        ("NaN", Scalar::Str),
        ("<<", Scalar::Str),
    ];
    for (text, expected) in table {
        assert_eq!(plain(text), *expected, "{text:?}");
    }
}

#[test]
fn s12_infinities_and_nan_are_spelled_as_go_yaml_spells_them() {
    assert_eq!(plain(".inf"), Scalar::Float(f64::INFINITY));
    assert_eq!(plain("+.Inf"), Scalar::Float(f64::INFINITY));
    assert_eq!(plain("-.INF"), Scalar::Float(f64::NEG_INFINITY));
    assert!(matches!(plain(".NaN"), Scalar::Float(f) if f.is_nan()));
    assert_eq!(plain(".Nan"), Scalar::Str);
}

#[test]
fn s12_explicit_tags_decide_or_refuse() {
    assert_eq!(tagged("0644", Tag::Str), Ok(Scalar::Str));
    assert_eq!(tagged("yes", Tag::Str), Ok(Scalar::Str));
    assert_eq!(tagged("0644", Tag::Int), Ok(Scalar::Int(420)));
    assert_eq!(tagged("3", Tag::Float), Ok(Scalar::Float(3.0)));
    assert_eq!(tagged("on", Tag::Bool), Ok(Scalar::Bool(true)));
    assert_eq!(tagged("~", Tag::Null), Ok(Scalar::Null));
    assert_eq!(tagged("abc", Tag::Other), Ok(Scalar::Str));
    let refused = tagged("abc", Tag::Int).unwrap_err().to_string();
    assert!(refused.contains("!!int"), "{refused}");
    assert!(tagged("1.5", Tag::Int).is_err());
    assert!(tagged("2", Tag::Bool).is_err());
}
