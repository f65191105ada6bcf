use super::*;

#[test]
fn paths_follow_kubelet_layout() {
    let root = Path::new("/var/log/pods");
    assert_eq!(
        pod_log_dir(root, "kube-system", "etcd", "0a1b"),
        Path::new("/var/log/pods/kube-system_etcd_0a1b")
    );
    assert_eq!(
        container_log_path(root, "default", "web", "u-1", "nginx", 3),
        Path::new("/var/log/pods/default_web_u-1/nginx/3.log")
    );
    assert_eq!(log_file_name(0), "0.log");
}

#[test]
fn logger_uri_has_one_query_key_with_the_encoded_path() {
    let uri = logger_uri(
        Path::new("/usr/bin/outpost"),
        Path::new("/var/log/pods/default_web_u-1/nginx/0.log"),
    )
    .unwrap();
    assert_eq!(
        uri,
        "binary:///usr/bin/outpost?container-log=/var/log/pods/default_web_u-1/nginx/0.log"
    );
}

#[test]
fn logger_uri_encodes_what_a_uri_would_read_differently() {
    let uri =
        logger_uri(Path::new("/opt/my tools/outpost"), Path::new("/logs/a+b?c#d%e&f=g/é.log"))
            .unwrap();
    assert_eq!(
        uri,
        "binary:///opt/my%20tools/outpost?container-log=/logs/a%2Bb%3Fc%23d%25e%26f%3Dg/%C3%A9.log"
    );
}

#[test]
fn logger_uri_needs_absolute_paths() {
    let err = logger_uri(Path::new("outpost"), Path::new("/x/0.log")).unwrap_err();
    assert!(matches!(&err, Error::RelativePath(p) if p == Path::new("outpost")), "{err}");
    let err = logger_uri(Path::new("/usr/bin/outpost"), Path::new("x/0.log")).unwrap_err();
    assert!(err.to_string().contains("x/0.log is not an absolute path"), "{err}");
}

#[test]
fn percent_encoding_keeps_unreserved_bytes_only() {
    let all: Vec<u8> = (0..=255).collect();
    let encoded = percent_encode(&all);
    let kept: String = encoded.split('%').map(|part| part.get(2..).unwrap_or(part)).collect();
    assert_eq!(kept, "-./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~");
    assert_eq!(encoded.len(), 67 + (256 - 67) * 3);
}
