use super::layout::{self, Descriptor, DockerArchiveImage, Index, Kind, Manifest, Platform};
use super::reference::{is_full_reference, normalize};

const DIFF_A: &str = "sha256:173d7c4c694228a7edb3cabf4db0bc611a870457961e0e99634e061925eb842f";
const DIFF_B: &str = "sha256:2e96653e93055014c6967a09113da6abd4b670e0a8c79778ce0a9615730dd25f";

#[test]
fn chain_ids_follow_the_image_spec() {
    // The second value is `printf '%s' "$DIFF_A $DIFF_B" | sha256sum`, and the name
    // containerd 1.6 gave the snapshot when unpacking these layers itself.
    let chain = layout::chain_ids(&[DIFF_A.to_owned(), DIFF_B.to_owned()]);
    assert_eq!(
        chain,
        [DIFF_A, "sha256:ce4a027dc765a1f956128180df76dbc946c6512abf60e3716cc0cd2896ee87bd"]
    );
    assert!(layout::chain_ids(&[]).is_empty());
    assert_eq!(layout::chain_ids(&[DIFF_B.to_owned()]), [DIFF_B]);
}

#[test]
fn references_are_normalized_as_docker_and_containerd_do() {
    let cases = [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:latest", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("library/busybox", "docker.io/library/busybox:latest"),
        ("docker.io/busybox", "docker.io/library/busybox:latest"),
        ("index.docker.io/library/busybox:1", "docker.io/library/busybox:1"),
        ("team/app:v2", "docker.io/team/app:v2"),
        ("outpost.test/busybox:latest", "outpost.test/busybox:latest"),
        ("localhost/app", "localhost/app:latest"),
        ("registry:5000/a/b:c", "registry:5000/a/b:c"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("docker.io/library/busybox:latest", "docker.io/library/busybox:latest"),
    ];
    for (given, want) in cases {
        assert_eq!(normalize(given).as_deref(), Ok(want), "{given}");
    }
    let digest = "sha256:0ff60967ceca3042053351fc38b45904cf3b06c7f700253ffbc05719f99a6628";
    assert_eq!(
        normalize(&format!("busybox@{digest}")),
        Ok(format!("docker.io/library/busybox@{digest}"))
    );
    assert_eq!(
        normalize(&format!("busybox:1@{digest}")),
        Ok(format!("docker.io/library/busybox:1@{digest}"))
    );
}

#[test]
fn invalid_references_are_rejected() {
    for bad in [
        "",
        "Busybox",
        "busybox:",
        "busybox:-x",
        "a//b",
        "busybox@sha256:xyz",
        "a/b/",
        ":latest",
        "a..b",
        "busybox:\u{e9}t\u{e9}",
        "busybox@md5:0ff60967ceca3042053351fc38b45904",
        "busybox@sha256:0ff60967ceca3042053351fc38b45904",
    ] {
        assert!(normalize(bad).is_err(), "{bad:?} was accepted");
    }
}

#[test]
fn an_invalid_reference_names_itself_and_what_the_grammar_refused() {
    let error = normalize("Busybox").unwrap_err();
    assert_eq!(error.to_string(), "invalid image reference \"Busybox\": invalid reference format");
    let error = normalize("busybox@md5:0ff60967ceca3042053351fc38b45904").unwrap_err();
    assert_eq!(error.reason, "unsupported digest algorithm");
    assert_eq!(normalize("busybox:\u{e9}").unwrap_err().reason, "it is not ASCII");
}

#[test]
fn a_bare_oci_ref_name_is_a_tag_not_a_name() {
    assert!(!is_full_reference("latest"));
    assert!(!is_full_reference("1.36"));
    assert!(is_full_reference("busybox:latest"));
    assert!(is_full_reference("outpost.test/busybox"));
}

#[test]
fn docker_archive_manifest_json_parses() {
    let json = r#"[{"Config":"abc.json","RepoTags":["busybox:latest"],"Layers":["1/layer.tar","2/layer.tar"]},
                   {"Config":"def.json","RepoTags":null,"Layers":[]}]"#;
    let images: Vec<DockerArchiveImage> = serde_json::from_str(json).unwrap();
    assert_eq!(images[0].config, "abc.json");
    assert_eq!(images[0].repo_tags.as_deref(), Some(&["busybox:latest".to_owned()][..]));
    assert_eq!(images[0].layers, ["1/layer.tar", "2/layer.tar"]);
    assert_eq!(images[1].repo_tags, None);
}

#[test]
fn oci_index_and_manifest_parse_and_get_gc_labels() {
    let index: Index = serde_json::from_str(&format!(
        r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"{}","digest":"{DIFF_A}","size":10,
            "annotations":{{"io.containerd.image.name":"docker.io/library/busybox:latest",
                            "org.opencontainers.image.ref.name":"latest"}}}}]}}"#,
        layout::OCI_MANIFEST
    ))
    .unwrap();
    let entry = &index.manifests[0];
    assert_eq!(layout::kind(&entry.media_type), Kind::Manifest);
    assert_eq!(
        entry.annotations[layout::ANNOTATION_IMAGE_NAME],
        "docker.io/library/busybox:latest"
    );
    assert_eq!(
        layout::index_gc_labels(&index).into_iter().collect::<Vec<_>>(),
        [("containerd.io/gc.ref.content.m.0".to_owned(), DIFF_A.to_owned())]
    );

    let manifest: Manifest = serde_json::from_str(&format!(
        r#"{{"schemaVersion":2,"config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{DIFF_B}","size":2}},
            "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{DIFF_A}","size":3}}]}}"#
    ))
    .unwrap();
    let labels = layout::manifest_gc_labels(&manifest);
    assert_eq!(labels["containerd.io/gc.ref.content.config"], DIFF_B);
    assert_eq!(labels["containerd.io/gc.ref.content.l.0"], DIFF_A);
    assert_eq!(labels.len(), 2);
}

#[test]
fn the_synthesized_docker_manifest_is_schema2() {
    let config = descriptor(layout::DOCKER_CONFIG, DIFF_B, 2, None);
    let layer = descriptor(layout::DOCKER_LAYER, DIFF_A, 3, None);
    let bytes = serde_json::to_vec(&layout::docker_manifest(config, vec![layer])).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["schemaVersion"], 2);
    assert_eq!(value["mediaType"], layout::DOCKER_MANIFEST);
    assert_eq!(value["config"]["digest"], DIFF_B);
    assert_eq!(value["layers"][0]["mediaType"], layout::DOCKER_LAYER);
    assert!(value["layers"][0].get("annotations").is_none(), "empty fields are left out");
}

#[test]
fn layer_media_type_is_sniffed() {
    assert_eq!(layout::docker_layer_media_type(&[0x1f, 0x8b, 8, 0]), layout::DOCKER_LAYER_GZIP);
    assert_eq!(layout::docker_layer_media_type(b"bin/"), layout::DOCKER_LAYER);
    assert_eq!(layout::docker_layer_media_type(&[]), layout::DOCKER_LAYER);
}

#[test]
fn an_index_picks_the_hosts_platform() {
    let host = Platform { architecture: "amd64".into(), os: "linux".into(), variant: None };
    let arm =
        Platform { architecture: "arm64".into(), os: "linux".into(), variant: Some("v8".into()) };
    let index = Index {
        manifests: vec![
            descriptor(layout::OCI_MANIFEST, DIFF_A, 1, Some(arm.clone())),
            descriptor(layout::OCI_MANIFEST, DIFF_B, 1, Some(host.clone())),
        ],
    };
    assert_eq!(layout::select_manifest(&index, &host).map(|d| d.digest.as_str()), Some(DIFF_B));
    assert_eq!(layout::select_manifest(&index, &arm).map(|d| d.digest.as_str()), Some(DIFF_A));
    let other = Platform { architecture: "s390x".into(), os: "linux".into(), variant: None };
    assert_eq!(layout::select_manifest(&index, &other), None);
    let untagged = Index { manifests: vec![descriptor(layout::OCI_MANIFEST, DIFF_A, 1, None)] };
    assert!(layout::select_manifest(&untagged, &other).is_some());
}

#[test]
fn digests_are_checked_before_they_become_paths() {
    assert!(layout::is_sha256_digest(DIFF_A));
    assert!(!layout::is_sha256_digest("sha256:../../etc/passwd"));
    assert!(!layout::is_sha256_digest(&DIFF_A.to_uppercase()));
    assert_eq!(layout::blob_path(DIFF_A), format!("blobs/sha256/{}", &DIFF_A[7..]));
}

fn descriptor(media_type: &str, digest: &str, size: i64, platform: Option<Platform>) -> Descriptor {
    Descriptor {
        media_type: media_type.to_owned(),
        digest: digest.to_owned(),
        size,
        annotations: Default::default(),
        platform,
    }
}
