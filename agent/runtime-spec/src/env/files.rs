//! `env[].valueFrom.fileKeyRef` (KEP-3721, kubelet 1.34's `EnvFiles`): a variable's value
//! is a key of an env file in one of the pod's volumes, typically an emptyDir an init
//! container wrote. The caller reads the files [`file_key_refs`] names into
//! [`EnvFiles`] when the container is created (after its init containers ran); the
//! lookup is [`outpost_core::env_file`]'s. `optional: true` leaves the variable out when
//! the file or the key is missing; otherwise the container is not created.

use std::path::{Component, Path};

use k8s_openapi::api::core::v1::{Container, FileKeySelector, Pod};
use outpost_core::env_file;

use crate::context::EnvFiles;
use crate::error::{EnvFileError, Error, Result};
use crate::subject::Subject;

/// The (volume, path) of each env file the container's variables name, each path
/// checked as the API server checks it (relative, no `..`): the files to read.
pub fn file_key_refs(pod: &Pod, container: &Container) -> Result<Vec<(String, String)>> {
    let at = Subject::container(pod, &container.name);
    let mut files = Vec::new();
    for var in container.env.iter().flatten() {
        let Some(selector) = var.value_from.as_ref().and_then(|v| v.file_key_ref.as_ref()) else {
            continue;
        };
        let path = Path::new(&selector.path);
        let inside = !selector.path.is_empty()
            && path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(Error::EnvFile(Box::new(EnvFileError::Path {
                at,
                name: var.name.clone(),
                volume: selector.volume_name.clone(),
                path: selector.path.clone(),
            })));
        }
        let file = (selector.volume_name.clone(), selector.path.clone());
        if !files.contains(&file) {
            files.push(file);
        }
    }
    Ok(files)
}

/// The value of variable `name` from its env file; `None` when it is optional and the
/// file or the key is missing.
pub(super) fn file_key(
    files: &EnvFiles,
    name: &str,
    selector: &FileKeySelector,
    at: &Subject,
) -> Result<Option<String>> {
    let optional = selector.optional.unwrap_or(false);
    let volume = selector.volume_name.clone();
    let path = selector.path.clone();
    let file = files.get(&(volume.clone(), path.clone())).and_then(Option::as_deref);
    let Some(text) = file else {
        if optional {
            return Ok(None);
        }
        return Err(Error::EnvFile(Box::new(EnvFileError::Missing {
            at: at.clone(),
            name: name.to_owned(),
            volume,
            path,
        })));
    };
    let value = env_file::lookup(text, &selector.key).map_err(|source| {
        Error::EnvFile(Box::new(EnvFileError::Format {
            at: at.clone(),
            name: name.to_owned(),
            volume: volume.clone(),
            path: path.clone(),
            source,
        }))
    })?;
    // kubelet 1.34's ParseEnv answers "" for a key it did not find, so an empty value
    // is taken as no value, as there.
    match value.filter(|v| !v.is_empty()) {
        Some(value) => Ok(Some(value.to_owned())),
        None if optional => Ok(None),
        None => Err(Error::EnvFile(Box::new(EnvFileError::Key {
            at: at.clone(),
            name: name.to_owned(),
            key: selector.key.clone(),
            volume,
            path,
        }))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::pod;

    fn selector(key: &str, optional: Option<bool>) -> FileKeySelector {
        FileKeySelector {
            volume_name: "config".into(),
            path: "app.env".into(),
            key: key.into(),
            optional,
        }
    }

    #[test]
    fn a_key_of_the_file_optional_or_not() {
        let at = Subject::pod(&pod("spec: {containers: []}"));
        let mut files = EnvFiles::new();
        let file = ("config".to_owned(), "app.env".to_owned());
        let value = |files: &EnvFiles, key, optional| {
            file_key(files, "V", &selector(key, optional), &at).map_err(|e| e.to_string())
        };
        let missing = value(&files, "A", None).unwrap_err();
        assert!(missing.contains("no file \"app.env\" in volume \"config\""), "{missing}");
        assert_eq!(value(&files, "A", Some(true)), Ok(None), "optional: no file, no variable");
        files.insert(file.clone(), None);
        assert_eq!(value(&files, "A", Some(true)), Ok(None));

        files.insert(file.clone(), Some("A=1\nEMPTY=\n".into()));
        assert_eq!(value(&files, "A", None), Ok(Some("1".into())));
        assert_eq!(value(&files, "B", Some(true)), Ok(None));
        let absent = value(&files, "B", Some(false)).unwrap_err();
        assert!(absent.contains("environment variable key \"B\" not found"), "{absent}");
        assert!(value(&files, "EMPTY", None).is_err(), "empty is none, as kubelet reads it");

        let long = format!("A={}\n", "x".repeat(env_file::MAX_LINE));
        files.insert(file, Some(long));
        let error = value(&files, "A", Some(true)).unwrap_err();
        assert!(error.contains("line 1 is longer than 65536 bytes"), "{error}");
    }

    #[test]
    fn paths_stay_inside_the_volume() {
        let refs = |path: &str| {
            let yaml = format!(
                "spec: {{containers: [{{name: app, image: b, env: [{{name: V, valueFrom: {{fileKeyRef: {{volumeName: config, path: '{path}', key: A}}}}}}, {{name: W, valueFrom: {{fileKeyRef: {{volumeName: config, path: '{path}', key: B}}}}}}]}}]}}"
            );
            let pod = pod(&yaml);
            let container = &pod.spec.as_ref().unwrap().containers[0];
            file_key_refs(&pod, container).map_err(|e| e.to_string())
        };
        assert_eq!(refs("app.env"), Ok(vec![("config".into(), "app.env".into())]), "once");
        assert_eq!(refs("env/app.env").unwrap().len(), 1);
        for outside in ["/etc/passwd", "../x", "a/../../x", ""] {
            let error = refs(outside).unwrap_err();
            assert!(error.contains("must be a relative path"), "{outside}: {error}");
        }
    }
}
