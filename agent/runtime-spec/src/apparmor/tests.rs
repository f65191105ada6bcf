use super::super::tests::{first_container, pod};
use super::*;

fn profile_of(yaml: &str) -> Result<Profile> {
    let pod = pod(yaml);
    profile(&pod, first_container(&pod))
}

#[test]
fn container_field_over_pod_field_over_annotation() {
    let annotated = "metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/a: localhost/from-annotation}}";
    assert_eq!(
        profile_of(&format!("{annotated}\nspec: {{containers: [{{name: a, image: b}}]}}")).unwrap(),
        Profile::Localhost("from-annotation".to_owned())
    );
    assert_eq!(
        profile_of(&format!(
            "{annotated}\nspec: {{securityContext: {{appArmorProfile: {{type: RuntimeDefault}}}}, containers: [{{name: a, image: b}}]}}"
        ))
        .unwrap(),
        Profile::RuntimeDefault
    );
    assert_eq!(
        profile_of(&format!(
            "{annotated}\nspec: {{securityContext: {{appArmorProfile: {{type: RuntimeDefault}}}}, containers: [{{name: a, image: b, securityContext: {{appArmorProfile: {{type: Unconfined}}}}}}]}}"
        ))
        .unwrap(),
        Profile::Unconfined
    );
    assert_eq!(profile_of("spec: {containers: [{name: a, image: b}]}").unwrap(), Profile::Unset);
    let other = "metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/other: runtime/default}}\nspec: {containers: [{name: a, image: b}]}";
    assert_eq!(profile_of(other).unwrap(), Profile::Unset, "another container's annotation");
}

#[test]
fn annotation_values() {
    let with = |value: &str| {
        profile_of(&format!(
            "metadata: {{annotations: {{container.apparmor.security.beta.kubernetes.io/a: \"{value}\"}}}}\nspec: {{containers: [{{name: a, image: b}}]}}"
        ))
    };
    assert_eq!(with("runtime/default").unwrap(), Profile::RuntimeDefault);
    assert_eq!(with("unconfined").unwrap(), Profile::Unconfined);
    assert_eq!(with("localhost/k8s-nginx").unwrap(), Profile::Localhost("k8s-nginx".to_owned()));
    let error = with("localhost/").unwrap_err().to_string();
    assert!(error.contains("localhost/<profile>"), "{error}");
    assert!(matches!(with("docker/default"), Err(Error::AppArmorAnnotation { .. })));
}

#[test]
fn invalid_fields_are_errors() {
    let error = profile_of(
        "spec: {containers: [{name: a, image: b, securityContext: {appArmorProfile: {type: Localhost}}}]}",
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("securityContext.appArmorProfile: type Localhost needs localhostProfile"),
        "{error}"
    );
    let error = profile_of(
        "spec: {securityContext: {appArmorProfile: {type: Strict}}, containers: [{name: a, image: b}]}",
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("spec.securityContext.appArmorProfile.type: \"Strict\""), "{error}");
}

#[test]
fn process_profile_where_apparmor_is_enabled() {
    let at = Subject { pod: "default/p".to_owned(), container: Some("a".to_owned()) };
    let local = Profile::Localhost("k8s-nginx".to_owned());
    assert_eq!(process_profile(&Profile::Unset, true, false, &at).unwrap(), None);
    assert_eq!(process_profile(&Profile::Unconfined, true, false, &at).unwrap(), None);
    assert_eq!(
        process_profile(&Profile::RuntimeDefault, true, false, &at).unwrap().as_deref(),
        Some(RUNTIME_DEFAULT)
    );
    assert_eq!(
        process_profile(&Profile::RuntimeDefault, true, true, &at).unwrap(),
        None,
        "privileged"
    );
    assert_eq!(process_profile(&local, true, true, &at).unwrap().as_deref(), Some("k8s-nginx"));
}

#[test]
fn process_profile_where_apparmor_is_disabled() {
    let at = Subject { pod: "default/p".to_owned(), container: Some("a".to_owned()) };
    assert_eq!(process_profile(&Profile::Unset, false, false, &at).unwrap(), None);
    assert_eq!(process_profile(&Profile::Unconfined, false, false, &at).unwrap(), None);
    for profile in [Profile::RuntimeDefault, Profile::Localhost("x".to_owned())] {
        let error = process_profile(&profile, false, false, &at).unwrap_err().to_string();
        assert!(error.contains("AppArmor is not enabled on the host"), "{error}");
    }
}

#[test]
fn the_spec_carries_the_profile() {
    let pod = pod(
        "spec: {containers: [{name: a, image: b, securityContext: {appArmorProfile: {type: RuntimeDefault}}}]}",
    );
    let mut ctx = super::super::tests::context(&pod);
    ctx.apparmor_enabled = true;
    let files = super::super::ContainerFiles::default();
    let spec = super::super::container_spec(
        &ctx,
        first_container(&pod),
        &super::super::tests::busybox(),
        &files,
        "c",
    )
    .unwrap();
    assert_eq!(
        spec.process().as_ref().unwrap().apparmor_profile().as_deref(),
        Some(RUNTIME_DEFAULT)
    );
    ctx.apparmor_enabled = false;
    let error = super::super::container_spec(
        &ctx,
        first_container(&pod),
        &super::super::tests::busybox(),
        &files,
        "c",
    )
    .unwrap_err();
    assert!(matches!(error, Error::AppArmorDisabled { .. }));
}
