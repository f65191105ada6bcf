use std::io::Write;
use std::time::Duration;

use super::*;

fn file(yaml: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(yaml.as_bytes()).unwrap();
    f
}

fn flags(path: &Path) -> Flags {
    Flags { config: Some(path.into()), node_name: Some("Edge-1".into()), ..Flags::default() }
}

#[test]
fn defaults_follow_the_design() {
    let c = Config::resolve(Flags { node_name: Some("n".into()), ..Flags::default() }).unwrap();
    assert_eq!(c.manifest_dir, Path::new(DEFAULT_MANIFEST_DIR));
    assert_eq!(c.state_dir, Path::new(DEFAULT_STATE_DIR));
    assert_eq!(c.containerd, ContainerdMode::Auto);
    assert_eq!(c.containerd_socket, Path::new(DEFAULT_CONTAINERD_SOCKET));
    assert_eq!(c.listen.to_string(), "127.0.0.1:10250");
    assert_eq!(c.listen, DEFAULT_LISTEN);
    assert_eq!(c.watcher, Preference::Auto);
}

#[test]
fn node_name_is_lowercased_like_kubelet() {
    let f = file("");
    assert_eq!(Config::resolve(flags(f.path())).unwrap().node_name, "edge-1");
}

#[test]
fn kubelet_configuration_aliases_are_accepted() {
    let f = file(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         staticPodPath: /srv/pods\nstaticPodURL: http://127.0.0.1:9/pods\n\
         staticPodURLHeader:\n  Authorization: [\"Bearer x\"]\naddress: 0.0.0.0\nport: 10255\n",
    );
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.manifest_dir, Path::new("/srv/pods"));
    assert_eq!(c.manifest_url.as_deref(), Some("http://127.0.0.1:9/pods"));
    assert_eq!(c.manifest_url_headers, vec![("Authorization".to_owned(), "Bearer x".to_owned())]);
    assert_eq!(c.listen.to_string(), "0.0.0.0:10255");
}

#[test]
fn outpost_names_in_the_file_and_flags_over_the_file() {
    let f = file(
        "manifestDir: /a\nstateDir: /s\nlisten: 127.0.0.1:1234\ncontainerd: managed\n\
         manifestUrlHeader: [\"X-Token: t\"]\nwatcher: inotify\nimagesDir: /i\n",
    );
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.manifest_dir, Path::new("/a"));
    assert_eq!(c.containerd, ContainerdMode::Managed);
    assert_eq!(c.watcher, Preference::Inotify);
    assert_eq!(c.manifest_url_headers, vec![("X-Token".to_owned(), "t".to_owned())]);
    let mut fl = flags(f.path());
    fl.manifest_dir = Some("/b".into());
    fl.listen = Some("127.0.0.1:99".parse().unwrap());
    let c = Config::resolve(fl).unwrap();
    assert_eq!(c.manifest_dir, Path::new("/b"));
    assert_eq!(c.listen.port(), 99);
    assert_eq!(c.state_dir, Path::new("/s"));
}

#[test]
fn mistakes_in_the_file_are_named() {
    let f = file("manifestDri: /a\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("manifestDri"), "{err}");
    let f = file("watcher: polling\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("watcher") && err.contains("polling"), "{err}");
    let err = Config::resolve(Flags {
        config: Some("/nonexistent/outpost.yaml".into()),
        ..Flags::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("/nonexistent/outpost.yaml"), "{err}");
}

#[test]
fn url_headers_must_have_a_name() {
    assert!(parse_header("Authorization: Bearer x").is_ok());
    assert!(parse_header("no colon").is_err());
    assert!(parse_header(": v").is_err());
}

#[test]
fn url_interval_accepts_kubelet_durations() {
    let f = file("httpCheckFrequency: 1m30s\n");
    assert_eq!(
        Config::resolve(flags(f.path())).unwrap().manifest_url_interval,
        Duration::from_secs(90)
    );
    let c =
        Config::resolve(Flags { manifest_url_interval: Some("250ms".into()), ..flags(f.path()) });
    assert_eq!(c.unwrap().manifest_url_interval, Duration::from_millis(250), "flags win");
    let d = Config::resolve(Flags { node_name: Some("n".into()), ..Flags::default() }).unwrap();
    assert_eq!(d.manifest_url_interval, DEFAULT_MANIFEST_URL_INTERVAL);
    for bad in ["0s", "-5s", "soon", ""] {
        let err =
            Config::resolve(Flags { manifest_url_interval: Some(bad.into()), ..flags(f.path()) });
        assert!(matches!(err, Err(Error::Duration { .. })), "{bad:?}: {err:?}");
    }
}

#[test]
fn tls_needs_a_certificate_and_a_key_and_client_cas_need_tls() {
    let f = file(
        "tlsCertFile: /etc/outpost/tls.crt\ntlsPrivateKeyFile: /etc/outpost/tls.key\ntokenFile: /etc/outpost/token\n",
    );
    let auth = Config::resolve(flags(f.path())).unwrap().auth;
    assert_eq!(
        auth.tls,
        Some(Tls {
            cert_file: "/etc/outpost/tls.crt".into(),
            key_file: "/etc/outpost/tls.key".into()
        })
    );
    assert_eq!(auth.token_file.as_deref(), Some(Path::new("/etc/outpost/token")));

    let half = file("tlsCertFile: /etc/outpost/tls.crt\n");
    let err = Config::resolve(flags(half.path())).unwrap_err();
    assert!(err.to_string().contains("tls-private-key-file"), "{err}");
    let ca_only = file("clientCaFile: /etc/outpost/ca.crt\n");
    let err = Config::resolve(flags(ca_only.path())).unwrap_err();
    assert!(err.to_string().contains("client-ca-file"), "{err}");
}

#[test]
fn containerd_mode_and_socket_from_file_and_flags() {
    let f = file("containerd: external\ncontainerdSocket: /run/k3s/containerd.sock\n");
    let c = Config::resolve(flags(f.path())).unwrap();
    assert_eq!(c.containerd, ContainerdMode::External);
    assert_eq!(c.containerd_socket, Path::new("/run/k3s/containerd.sock"));
    let mut fl = flags(f.path());
    fl.containerd = Some(ContainerdMode::Auto);
    assert_eq!(Config::resolve(fl).unwrap().containerd, ContainerdMode::Auto);
    let f = file("containerd: docker\n");
    let err = Config::resolve(flags(f.path())).unwrap_err().to_string();
    assert!(err.contains("containerd") && err.contains("auto, managed or external"), "{err}");
}
