//! Resource names as kubelet classifies them (its `v1helper`): which names are native
//! (`cpu`, `memory`, anything under `kubernetes.io/`) and which are extended resources,
//! the names device plugins register under (D1).

/// The prefix a native resource's qualified name carries (`v1.ResourceDefaultNamespacePrefix`).
const NATIVE_PREFIX: &str = "kubernetes.io/";
/// The prefix quota gives a resource's name (`v1.DefaultResourceRequestsPrefix`).
const REQUESTS_PREFIX: &str = "requests.";

/// kubelet's `IsNativeResource`: a name without a domain, or one in `kubernetes.io/`.
pub fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains(NATIVE_PREFIX)
}

/// kubelet's `IsExtendedResourceName`: not native, not starting with `requests.`, and a
/// qualified name once quota's `requests.` is put before it (so its domain, with that
/// prefix, is a DNS subdomain of at most 253 characters, and its name part at most 63
/// characters of `[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]`). Device plugins must register
/// under such a name, as `vendor.example/device`.
pub fn is_extended(name: &str) -> bool {
    if is_native(name) || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    crate::node_labels::qualified_name(&format!("{REQUESTS_PREFIX}{name}")).is_ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// D1: the names device plugins register under, and those kubelet refuses.
    #[test]
    fn d1_extended_resource_names_as_kubelet_s() {
        for name in [
            "squat.ai/serial",
            "example.com/foo",
            "example.com/Foo_bar.1",
            "nvidia.com/gpu",
            "a/b",
            "sub.domain.example/x",
        ] {
            assert!(is_extended(name), "{name} is an extended resource");
        }
        let long_name = format!("example.com/{}", "a".repeat(64));
        let long_domain = format!("{}.com/x", "a".repeat(241));
        for name in [
            "",
            "cpu",
            "memory",
            "foo",
            "kubernetes.io/foo",
            "example.kubernetes.io/foo",
            "requests.example.com/foo",
            "example.com/",
            "/foo",
            "example.com/foo/bar",
            "Example.com/foo",
            "example.com/-foo",
            "example.com/foo-",
            "example.com/fo o",
            "exa_mple.com/foo",
            long_name.as_str(),
            long_domain.as_str(),
        ] {
            assert!(!is_extended(name), "{name:?} is not an extended resource");
        }
        // The domain's limit counts quota's `requests.` prefix: 244 characters are the most.
        assert!(is_extended(&format!("{}/x", "a".repeat(244))));
        assert!(!is_extended(&format!("{}/x", "a".repeat(245))));
        assert!(is_extended(&format!("example.com/{}", "a".repeat(63))));
    }

    proptest! {
        /// D1: a native name is never an extended one, and an extended one always has a
        /// domain and one name part.
        #[test]
        fn d1_native_and_extended_never_overlap(name in "[a-zA-Z0-9./_-]{0,40}") {
            if is_native(&name) {
                prop_assert!(!is_extended(&name));
            }
            if is_extended(&name) {
                prop_assert_eq!(name.matches('/').count(), 1);
                prop_assert!(!name.contains(NATIVE_PREFIX));
            }
        }

        /// D1: any lowercase domain with a valid name part is an extended resource.
        #[test]
        fn d1_a_domain_and_a_name_make_an_extended_resource(
            domain in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]{1,10}){0,3}",
            name in "[A-Za-z0-9]([A-Za-z0-9_.-]{0,30}[A-Za-z0-9])?",
        ) {
            prop_assume!(!domain.contains("kubernetes.io") && !domain.starts_with("requests."));
            let resource = format!("{domain}/{name}");
            prop_assert!(is_extended(&resource), "{}", resource);
        }
    }
}
