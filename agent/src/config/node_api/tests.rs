//! N1 settings: KubeletConfiguration's blocks, kubelet's flags over them, kubelet's TTL
//! defaults, and nothing changed when nothing is set.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::config::{Config, Settings};

fn file(yaml: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(yaml.as_bytes()).unwrap();
    f
}

fn parse_flags(args: &[&str]) -> Settings {
    #[derive(clap::Parser)]
    struct Run {
        #[command(flatten)]
        settings: Settings,
    }
    let args = std::iter::once("run").chain(args.iter().copied());
    <Run as clap::Parser>::try_parse_from(args).unwrap().settings
}

fn resolve(args: &[&str], yaml: &str) -> Result<Config, crate::config::Error> {
    let f = file(yaml);
    let path = f.path().to_str().unwrap().to_owned();
    let mut all = vec!["--node-name", "n", "--config", &path];
    all.extend_from_slice(args);
    Config::resolve(parse_flags(&all))
}

/// N1: with nothing configured, access is as before: no anonymous callers, no
/// TokenReview, AlwaysAllow.
#[test]
fn n1_nothing_configured_keeps_the_earlier_behaviour() {
    let c = resolve(&[], "").unwrap();
    assert_eq!(c.api.auth.access, Access::default());
    assert_eq!(c.api.auth.access.authorization, Authorization::AlwaysAllow);
    assert!(!c.api.auth.access.anonymous);
    assert_eq!(c.api.auth.access.token_webhook, None);
}

/// N1: KubeletConfiguration's `authentication` and `authorization` blocks, kubelet's
/// default TTLs where left out.
#[test]
fn n1_kubelet_configuration_blocks() {
    let yaml = "kubeconfig: /etc/outpost/kubeconfig\n\
        tlsCertFile: /t.crt\ntlsPrivateKeyFile: /t.key\n\
        authentication:\n  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}\n\
          \x20 webhook: {enabled: true}\n  anonymous: {enabled: true}\n\
        authorization:\n  mode: Webhook\n";
    let c = resolve(&[], yaml).unwrap();
    assert_eq!(c.api.auth.client_ca_file.as_deref(), Some(Path::new("/etc/kubernetes/pki/ca.crt")));
    assert_eq!(
        c.api.auth.access,
        Access {
            anonymous: true,
            token_webhook: Some(Duration::from_secs(120)),
            authorization: Authorization::Webhook {
                authorized_ttl: Duration::from_secs(300),
                unauthorized_ttl: Duration::from_secs(30),
            },
        }
    );
    let yaml = "kubeconfig: /k\nauthentication:\n  webhook: {enabled: true, cacheTTL: 10s}\n\
        authorization:\n  mode: Webhook\n  webhook: {cacheAuthorizedTTL: 1m, cacheUnauthorizedTTL: 0s}\n";
    let c = resolve(&[], yaml).unwrap();
    assert_eq!(c.api.auth.access.token_webhook, Some(Duration::from_secs(10)));
    assert_eq!(
        c.api.auth.access.authorization,
        Authorization::Webhook {
            authorized_ttl: Duration::from_secs(60),
            unauthorized_ttl: Duration::ZERO
        }
    );
}

/// N1: kubelet's flags, over the file.
#[test]
fn n1_kubelet_flags_over_the_file() {
    let yaml = "kubeconfig: /k\nauthentication:\n  webhook: {enabled: true}\n  anonymous: {enabled: true}\n\
        authorization: {mode: Webhook}\n";
    let c = resolve(
        &[
            "--anonymous-auth=false",
            "--authentication-token-webhook-cache-ttl",
            "1m",
            "--authorization-mode",
            "AlwaysAllow",
        ],
        yaml,
    )
    .unwrap();
    assert!(!c.api.auth.access.anonymous);
    assert_eq!(c.api.auth.access.token_webhook, Some(Duration::from_secs(60)));
    assert_eq!(c.api.auth.access.authorization, Authorization::AlwaysAllow);

    let c = resolve(
        &[
            "--kubeconfig",
            "/k",
            "--anonymous-auth",
            "--authentication-token-webhook",
            "--authorization-mode",
            "Webhook",
            "--authorization-webhook-cache-authorized-ttl",
            "2m",
            "--authorization-webhook-cache-unauthorized-ttl",
            "5s",
        ],
        "",
    )
    .unwrap();
    assert!(c.api.auth.access.anonymous);
    assert_eq!(c.api.auth.access.token_webhook, Some(Duration::from_secs(120)));
    assert_eq!(
        c.api.auth.access.authorization,
        Authorization::Webhook {
            authorized_ttl: Duration::from_secs(120),
            unauthorized_ttl: Duration::from_secs(5)
        }
    );
}

#[test]
fn webhooks_need_a_kubeconfig_and_ttls_are_durations() {
    let err = resolve(&["--authentication-token-webhook"], "").unwrap_err();
    assert!(err.to_string().contains("--kubeconfig"), "{err}");
    let err = resolve(&[], "authorization: {mode: Webhook}\n").unwrap_err();
    assert!(err.to_string().contains("--kubeconfig"), "{err}");
    let err = resolve(&["--authorization-webhook-cache-authorized-ttl", "soon"], "").unwrap_err();
    assert!(err.to_string().contains("cacheAuthorizedTTL"), "{err}");
    let err = resolve(&[], "authorization: {mode: webhook}\n").unwrap_err();
    assert!(err.to_string().contains("AlwaysAllow or Webhook"), "{err}");
    let err = resolve(&[], "authentication: {x509: {clientCaFile: /x}}\n").unwrap_err();
    assert!(err.to_string().contains("clientCaFile"), "{err}");
}
