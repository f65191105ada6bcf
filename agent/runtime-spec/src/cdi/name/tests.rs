//! D3: qualified names are split and checked as the CDI library's parser does, and
//! refused in its words.

use proptest::prelude::*;

use super::*;

fn refused(device: &str) -> String {
    parse_qualified_name(device).unwrap_err().to_string()
}

#[test]
fn d3_qualified_names_split_into_vendor_class_and_name() {
    for (device, vendor, class, name) in [
        ("vendor.com/class=dev", "vendor.com", "class", "dev"),
        ("a/b=c", "a", "b", "c"),
        ("vendor.com/class=0", "vendor.com", "class", "0"),
        ("nvidia.com/gpu=all", "nvidia.com", "gpu", "all"),
        ("Vendor-1.com/Class_x.y=Name.1:2_b-c", "Vendor-1.com", "Class_x.y", "Name.1:2_b-c"),
    ] {
        let parsed = parse_qualified_name(device).unwrap();
        assert_eq!(parsed, QualifiedName { vendor, class, name }, "{device}");
        assert_eq!(parsed.to_string(), device);
        assert!(is_qualified_name(device));
    }
}

#[test]
fn d3_a_name_that_does_not_split_is_missing_its_vendor() {
    for device in [
        "",
        "/dev/null",
        "vendor.com/class",
        "vendor.com=dev",
        "vendor.com/=dev",
        "/class=dev",
        "vendor.com/class=",
        "dev",
    ] {
        assert_eq!(refused(device), format!("unqualified device {device:?}, missing vendor"));
        assert!(!is_qualified_name(device));
    }
}

#[test]
fn d3_each_part_is_refused_in_the_library_s_words() {
    let cases = [
        ("1vendor.com/class=dev", r#"invalid vendor. "1vendor.com", should start with letter"#),
        (
            "vendor.com-/class=dev",
            r#"invalid vendor. "vendor.com-", should end with a letter or digit"#,
        ),
        ("ven dor.com/class=dev", r#"invalid vendor. invalid character ' ' in name "ven dor.com""#),
        ("vendor.com/cl@ss=dev", r#"invalid class. invalid character '@' in name "cl@ss""#),
        ("vendor.com/_class=dev", r#"invalid class. "_class", should start with letter"#),
        ("vendor.com/a/b=dev", r#"invalid class. invalid character '/' in name "a/b""#),
        ("vendor.com/class=-dev", r#"invalid class "-dev", should start with a letter or digit"#),
        ("vendor.com/class=de/v", r#"invalid character '/' in device name "de/v""#),
        ("vendor.com/class=a=b", r#"invalid character '=' in device name "a=b""#),
        ("vendor.com/class=dev-", r#"invalid name "dev-", should end with a letter or digit"#),
        ("vendor.com/class=dév", r#"invalid character 'é' in device name "dév""#),
        ("vendor.com/class=a:", r#"invalid name "a:", should end with a letter or digit"#),
    ];
    for (device, reason) in cases {
        assert_eq!(refused(device), format!("invalid device {device:?}: {reason}"));
    }
}

#[test]
fn d3_single_characters_are_valid_parts_and_empty_ones_are_not() {
    assert!(validate_vendor_name("a").is_ok());
    assert!(validate_class_name("Z").is_ok());
    assert!(validate_device_name("7").is_ok());
    assert_eq!(validate_vendor_name("").unwrap_err().to_string(), "invalid vendor. empty name");
    assert_eq!(validate_class_name("").unwrap_err().to_string(), "invalid class. empty name");
    assert_eq!(validate_device_name("").unwrap_err().to_string(), "invalid (empty) device name");
    assert_eq!(
        validate_class_name("9").unwrap_err().to_string(),
        r#"invalid class. "9", should start with letter"#
    );
}

#[test]
fn d3_a_kind_splits_at_its_first_slash() {
    assert_eq!(parse_qualifier("vendor.com/class"), Some(("vendor.com", "class")));
    assert_eq!(parse_qualifier("vendor.com/a/b"), Some(("vendor.com", "a/b")));
    assert_eq!(parse_qualifier("vendor.com"), None);
    assert_eq!(parse_qualifier("/class"), None);
    assert_eq!(parse_qualifier("vendor.com/"), None);
}

fn part(first: &'static str, middle: &'static str) -> impl Strategy<Value = String> {
    let last = "[A-Za-z0-9]";
    (
        proptest::string::string_regex(first).unwrap(),
        proptest::string::string_regex(&format!("{middle}{{0,8}}")).unwrap(),
        proptest::string::string_regex(last).unwrap(),
        any::<bool>(),
    )
        .prop_map(
            |(first, middle, last, single)| {
                if single { first } else { format!("{first}{middle}{last}") }
            },
        )
}

proptest! {
    /// D3: every name made of valid parts parses back into them.
    #[test]
    fn d3_valid_parts_round_trip(
        vendor in part("[A-Za-z]", "[A-Za-z0-9_.-]"),
        class in part("[A-Za-z]", "[A-Za-z0-9_.-]"),
        name in part("[A-Za-z0-9]", "[A-Za-z0-9_.:-]"),
    ) {
        let device = format!("{vendor}/{class}={name}");
        let parsed = parse_qualified_name(&device).unwrap();
        prop_assert_eq!(parsed, QualifiedName { vendor: &vendor, class: &class, name: &name });
    }

    /// D3: any text either parses into parts that make it again, or is refused; never a
    /// panic.
    #[test]
    fn d3_any_text_parses_back_or_is_refused(device in "\\PC{0,24}") {
        if let Ok(parsed) = parse_qualified_name(&device) {
            prop_assert_eq!(parsed.to_string(), device);
        }
    }
}
