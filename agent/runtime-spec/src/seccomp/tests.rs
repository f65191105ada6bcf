use std::path::{Path, PathBuf};

use oci_spec::runtime::{Arch, Capability, LinuxSeccompAction, LinuxSeccompOperator, LinuxSyscall};

use super::super::tests::{busybox, context, first_container, pod};
use super::super::{ContainerFiles, container_spec};
use super::*;

fn profile_of(yaml: &str) -> Result<Profile> {
    let pod = pod(yaml);
    profile(&pod, first_container(&pod))
}

fn localhost(path: &str) -> Profile {
    Profile::Localhost(PathBuf::from(path))
}

fn at() -> Subject {
    Subject { pod: "default/p".to_owned(), container: Some("a".to_owned()) }
}

#[test]
fn container_field_over_pod_field_over_annotations() {
    let annotations = "metadata: {annotations: {seccomp.security.alpha.kubernetes.io/pod: runtime/default, container.seccomp.security.alpha.kubernetes.io/a: localhost/a.json}}";
    let with = |spec: &str| profile_of(&format!("{annotations}\nspec: {spec}")).unwrap();
    assert_eq!(with("{containers: [{name: a, image: b}]}"), localhost("a.json"));
    assert_eq!(
        with(
            "{securityContext: {seccompProfile: {type: Unconfined}}, containers: [{name: a, image: b}]}"
        ),
        Profile::Unconfined
    );
    assert_eq!(
        with(
            "{securityContext: {seccompProfile: {type: Unconfined}}, containers: [{name: a, image: b, securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/audit.json}}}]}"
        ),
        localhost("profiles/audit.json")
    );
    let pod_annotation = "metadata: {annotations: {seccomp.security.alpha.kubernetes.io/pod: docker/default}}\nspec: {containers: [{name: a, image: b}]}";
    assert_eq!(profile_of(pod_annotation).unwrap(), Profile::RuntimeDefault);
    assert_eq!(
        profile_of("spec: {containers: [{name: a, image: b}]}").unwrap(),
        Profile::Unconfined,
        "kubelet's default without --seccomp-default"
    );
}

#[test]
fn annotation_values() {
    let with = |value: &str| {
        profile_of(&format!(
            "metadata: {{annotations: {{seccomp.security.alpha.kubernetes.io/pod: \"{value}\"}}}}\nspec: {{containers: [{{name: a, image: b}}]}}"
        ))
    };
    assert_eq!(with("runtime/default").unwrap(), Profile::RuntimeDefault);
    assert_eq!(with("docker/default").unwrap(), Profile::RuntimeDefault);
    assert_eq!(with("unconfined").unwrap(), Profile::Unconfined);
    assert_eq!(with("localhost/my/profile.json").unwrap(), localhost("my/profile.json"));
    let error = with("RuntimeDefault").unwrap_err().to_string();
    assert!(
        error.contains("annotation seccomp.security.alpha.kubernetes.io/pod: \"RuntimeDefault\""),
        "{error}"
    );
    assert!(matches!(
        with("localhost//etc/x.json"),
        Err(crate::Error::SeccompLocalhostPath { .. })
    ));
}

#[test]
fn invalid_fields_are_errors() {
    let with = |security: &str| {
        profile_of(&format!(
            "spec: {{containers: [{{name: a, image: b, securityContext: {{seccompProfile: {security}}}}}]}}"
        ))
        .unwrap_err()
        .to_string()
    };
    let error = with("{type: Localhost}");
    assert!(
        error.contains("securityContext.seccompProfile: type Localhost needs localhostProfile"),
        "{error}"
    );
    let error = with("{type: Localhost, localhostProfile: ../../etc/shadow}");
    assert!(
        error.contains("localhostProfile: \"../../etc/shadow\" must be a relative path"),
        "{error}"
    );
    let error = with("{type: Localhost, localhostProfile: /abs.json}");
    assert!(error.contains("\"/abs.json\""), "{error}");
    let error = with("{type: Strict}");
    assert!(
        error.contains(
            "securityContext.seccompProfile.type: \"Strict\" is not a seccomp profile type"
        ),
        "{error}"
    );
}

fn rules_for<'a>(seccomp: &'a LinuxSeccomp, name: &str) -> Vec<&'a LinuxSyscall> {
    seccomp.syscalls().iter().flatten().filter(|s| s.names().iter().any(|n| n == name)).collect()
}

fn allowed_plainly(seccomp: &LinuxSeccomp, name: &str) -> bool {
    rules_for(seccomp, name)
        .iter()
        .any(|s| s.action() == LinuxSeccompAction::ScmpActAllow && s.args().is_none())
}

#[test]
fn runtime_default_is_an_allowlist() {
    let seccomp = runtime_default::profile(&[Capability::Chown]);
    assert_eq!(seccomp.default_action(), LinuxSeccompAction::ScmpActErrno);
    assert_eq!(seccomp.default_errno_ret(), None, "EPERM");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            seccomp.architectures().clone().unwrap(),
            [Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]
        );
        assert!(allowed_plainly(&seccomp, "arch_prctl"));
    }
    for name in ["read", "mkdir", "execve", "socket", "ptrace", "rseq"] {
        assert!(allowed_plainly(&seccomp, name), "{name}");
    }
    for name in ["mount", "unshare", "setns", "reboot", "chroot", "bpf", "init_module", "keyctl"] {
        assert!(!allowed_plainly(&seccomp, name), "{name} needs a capability, or is never allowed");
    }
    let personalities = rules_for(&seccomp, "personality");
    let values: Vec<u64> =
        personalities.iter().map(|s| s.args().as_ref().unwrap()[0].value()).collect();
    assert_eq!(values, [0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff]);
}

#[test]
fn runtime_default_without_sys_admin_filters_clone() {
    let seccomp = runtime_default::profile(&[Capability::Chown]);
    let clone = rules_for(&seccomp, "clone");
    assert_eq!(clone.len(), 1);
    let arg = clone[0].args().as_ref().unwrap()[0];
    assert_eq!(
        (arg.index(), arg.value(), arg.value_two(), arg.op()),
        (0, 0x7e02_0000, Some(0), LinuxSeccompOperator::ScmpCmpMaskedEq)
    );
    let clone3 = rules_for(&seccomp, "clone3");
    assert_eq!(clone3.len(), 1);
    assert_eq!(
        (clone3[0].action(), clone3[0].errno_ret()),
        (LinuxSeccompAction::ScmpActErrno, Some(38))
    );
}

#[test]
fn runtime_default_follows_the_capabilities() {
    let seccomp = runtime_default::profile(&[
        Capability::SysAdmin,
        Capability::SysChroot,
        Capability::SysTime,
        Capability::SysModule,
    ]);
    for name in ["clone", "clone3", "mount", "unshare", "chroot", "settimeofday", "init_module"] {
        assert!(allowed_plainly(&seccomp, name), "{name}");
    }
    assert_eq!(rules_for(&seccomp, "clone").len(), 1, "no filtered clone with CAP_SYS_ADMIN");
    assert!(
        rules_for(&seccomp, "clone3")
            .iter()
            .all(|s| s.action() == LinuxSeccompAction::ScmpActAllow)
    );
    assert!(!allowed_plainly(&seccomp, "reboot"));
}

const DOCKER_STYLE: &str = r#"{
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 1,
    "archMap": [
        {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
        {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}
    ],
    "syscalls": [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW", "comment": "ignored"},
        {"name": "personality", "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 8, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]},
        {"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64"]}},
        {"names": ["set_tls"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["arm64"]}},
        {"names": ["uname"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": ["amd64", "arm64"]}},
        {"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}
    ]
}"#;

fn names(seccomp: &LinuxSeccomp) -> Vec<String> {
    seccomp.syscalls().iter().flatten().flat_map(|s| s.names().clone()).collect()
}

#[test]
fn a_docker_profile_converts_for_this_machine() {
    let seccomp = convert(DOCKER_STYLE, &[Capability::Chown]).unwrap().unwrap();
    assert_eq!(seccomp.default_errno_ret(), Some(1));
    let arch_specific = if cfg!(target_arch = "x86_64") {
        assert_eq!(
            seccomp.architectures().clone().unwrap(),
            [Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]
        );
        vec!["arch_prctl"]
    } else if cfg!(target_arch = "aarch64") {
        vec!["set_tls"]
    } else {
        vec!["uname"]
    };
    let mut expected = vec!["read", "write", "personality", "clone"];
    expected.extend(arch_specific);
    expected.push("mkdir");
    assert_eq!(names(&seccomp), expected);
    let mkdir = rules_for(&seccomp, "mkdir")[0];
    assert_eq!((mkdir.action(), mkdir.errno_ret()), (LinuxSeccompAction::ScmpActErrno, Some(13)));
    assert_eq!(rules_for(&seccomp, "personality")[0].args().as_ref().unwrap()[0].value(), 8);

    let admin = convert(DOCKER_STYLE, &[Capability::SysAdmin]).unwrap().unwrap();
    assert!(names(&admin).contains(&"mount".to_owned()));
    assert!(!names(&admin).contains(&"clone".to_owned()));
}

#[test]
fn an_oci_profile_converts_as_is() {
    let json = r#"{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
        "flags": ["SECCOMP_FILTER_FLAG_LOG"],
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}"#;
    let seccomp = convert(json, &[]).unwrap().unwrap();
    assert_eq!(seccomp.default_action(), LinuxSeccompAction::ScmpActAllow);
    assert_eq!(seccomp.architectures().clone().unwrap(), [Arch::ScmpArchX86_64]);
    assert_eq!(names(&seccomp), ["mkdir", "mkdirat"]);
    assert!(seccomp.flags().is_some());
}

#[test]
fn an_empty_profile_is_no_filter() {
    assert_eq!(convert("{}", &[]).unwrap(), None);
}

#[test]
fn invalid_profiles_say_why() {
    let error = |json: &str| convert(json, &[]).unwrap_err().to_string();
    assert!(error("not json").starts_with("is not a seccomp profile"));
    assert!(error(r#"{"defaultAction": "SCMP_ACT_NOPE"}"#).starts_with("is not a seccomp profile"));
    assert_eq!(
        error(r#"{"syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]}"#),
        "has syscall rules but no defaultAction"
    );
    assert_eq!(
        error(
            r#"{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"], "archMap": [{"architecture": "SCMP_ARCH_X86_64"}]}"#
        ),
        "sets both architectures and archMap; use one"
    );
    assert_eq!(
        error(
            r#"{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"name": "a", "names": ["b"], "action": "SCMP_ACT_ALLOW"}]}"#
        ),
        "has a rule with both name and names; use one"
    );
}

#[test]
fn privileged_and_unread_profiles() {
    let file = LocalhostProfile { path: PathBuf::from("/p.json"), json: "{".to_owned() };
    assert_eq!(
        seccomp(&Profile::RuntimeDefault, None, &[], true, &at()).unwrap(),
        None,
        "privileged"
    );
    assert_eq!(seccomp(&localhost("p.json"), Some(&file), &[], true, &at()).unwrap(), None);
    assert!(matches!(
        seccomp(&localhost("p.json"), None, &[], false, &at()),
        Err(crate::Error::SeccompNotRead { .. })
    ));
    let error =
        seccomp(&localhost("p.json"), Some(&file), &[], false, &at()).unwrap_err().to_string();
    assert!(
        error.starts_with(
            "pod default/p container a: seccomp profile /p.json: is not a seccomp profile"
        ),
        "{error}"
    );
    assert_eq!(seccomp(&Profile::Unconfined, None, &[], false, &at()).unwrap(), None);
}

#[test]
fn the_spec_carries_the_filter() {
    let pod = pod(
        "spec: {containers: [{name: a, image: b, securityContext: {seccompProfile: {type: Localhost, localhostProfile: deny-mkdir.json}}}]}",
    );
    let files = ContainerFiles {
        seccomp_profile: Some(LocalhostProfile {
            path: Path::new("/var/lib/outpost/seccomp/deny-mkdir.json").to_path_buf(),
            json: r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}]}"#.to_owned(),
        }),
        ..ContainerFiles::default()
    };
    let spec =
        container_spec(&context(&pod), first_container(&pod), &busybox(), &files, "c").unwrap();
    let seccomp = spec.linux().as_ref().unwrap().seccomp().clone().unwrap();
    assert_eq!(names(&seccomp), ["mkdir"]);

    let runtime_default = pod_with_runtime_default();
    let spec = container_spec(
        &context(&runtime_default),
        first_container(&runtime_default),
        &busybox(),
        &ContainerFiles::default(),
        "c",
    )
    .unwrap();
    let seccomp = spec.linux().as_ref().unwrap().seccomp().clone().unwrap();
    assert!(allowed_plainly(&seccomp, "chroot"), "the default capabilities hold CAP_SYS_CHROOT");
    assert!(!allowed_plainly(&seccomp, "mount"));
}

fn pod_with_runtime_default() -> k8s_openapi::api::core::v1::Pod {
    pod(
        "spec: {securityContext: {seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: b}]}",
    )
}
