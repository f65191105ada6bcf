//! The downward API's selectors, read alike by a container's environment (`env`) and by
//! a downwardAPI volume's files (`projection`): the key of a map in a field path
//! (`metadata.labels['KEY']`), and a container's resource (`resourceFieldRef`).

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use outpost_core::quantity::{self, Quantity};

use super::subject::Subject;

/// Why a container's resource cannot be read through a `resourceFieldRef`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{at}: {field}: resourceFieldRef {resource:?} is not supported; use limits.cpu, \
         limits.memory, limits.ephemeral-storage, requests.cpu, requests.memory or \
         requests.ephemeral-storage"
    )]
    ResourceField { at: Subject, field: String, resource: String },

    #[error(
        "{at}: {field}: resourceFieldRef names container {container:?}, which the pod does not have"
    )]
    ResourceContainer { at: Subject, field: String, container: String },

    #[error(
        "{at}: {field}: resourceFieldRef {resource} is not set on the container, and Outpost \
         does not publish the node's allocatable resources; set resources.{resource}"
    )]
    LimitNotSet { at: Subject, field: String, resource: String },

    #[error(
        "{at}: {field}: {value:?} is not a valid quantity (e.g. \"500m\", \"2\", \"64Mi\", \"1G\")"
    )]
    Quantity {
        at: Subject,
        field: String,
        value: String,
        #[source]
        source: quantity::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The quantity set for `resource` under `kind` (`limits` or `requests`); a request that
/// is not set is the limit, as the API server defaults it.
pub(super) fn quantity_of<'c>(
    container: &'c Container,
    kind: &str,
    resource: &str,
) -> Option<&'c ApiQuantity> {
    let resources = container.resources.as_ref()?;
    let limit = || resources.limits.as_ref().and_then(|m| m.get(resource));
    match kind {
        "limits" => limit(),
        _ => resources.requests.as_ref().and_then(|m| m.get(resource)).or_else(limit),
    }
}

/// `KEY` of `<map>['KEY']`.
pub(super) fn subscript<'p>(path: &'p str, map: &str) -> Option<&'p str> {
    path.strip_prefix(map)?.strip_prefix("['")?.strip_suffix("']")
}

/// A container's resource, as kubelet's `ExtractContainerResourceValue`: in units of the
/// divisor (CPU compared in thousandths), rounded up. An unset request is the limit, else
/// 0; an unset limit is an error (kubelet would give the node's allocatable). The
/// container is the one the selector names, else `container`; `field` names what asks
/// (`env X`, a downward API volume's file) in errors.
pub(super) fn resource_field_ref(
    pod: &Pod,
    container: Option<&Container>,
    field: &str,
    selector: &ResourceFieldSelector,
    at: &Subject,
) -> Result<String> {
    let named = selector.container_name.as_deref().filter(|n| !n.is_empty());
    let target = match named {
        None => container,
        Some(other) => pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
            .find(|c| c.name == other),
    };
    let target = target.ok_or_else(|| Error::ResourceContainer {
        at: at.clone(),
        field: field.to_owned(),
        container: named.unwrap_or_default().to_owned(),
    })?;
    let resource = selector.resource.as_str();
    let (kind, resource_name) = resource.split_once('.').unwrap_or(("", resource));
    if !matches!(kind, "limits" | "requests")
        || !matches!(resource_name, "cpu" | "memory" | "ephemeral-storage")
    {
        return Err(Error::ResourceField {
            at: at.clone(),
            field: field.to_owned(),
            resource: resource.to_owned(),
        });
    }
    let quantity_error = |name: String, value: &str| {
        let value = value.to_owned();
        move |source| Error::Quantity { at: at.clone(), field: name, value, source }
    };
    let Some(set) = quantity_of(target, kind, resource_name) else {
        if kind == "requests" {
            return Ok("0".to_owned());
        }
        return Err(Error::LimitNotSet {
            at: at.clone(),
            field: field.to_owned(),
            resource: resource.to_owned(),
        });
    };
    let set_field = format!("resources.{resource}");
    let quantity = Quantity::parse(&set.0).map_err(quantity_error(set_field.clone(), &set.0))?;
    let divisor_text = selector.divisor.as_ref().map_or("1", |d| d.0.as_str());
    let divisor_field = format!("{field}: resourceFieldRef.divisor");
    let divisor = Quantity::parse(divisor_text)
        .map_err(quantity_error(divisor_field.clone(), divisor_text))?;
    let (amount, unit) = if resource_name == "cpu" {
        (quantity.milli_value(), divisor.milli_value())
    } else {
        (quantity.value(), divisor.value())
    };
    let amount = amount.map_err(quantity_error(set_field, &set.0))?;
    let unit = unit.map_err(quantity_error(divisor_field, divisor_text))?.max(1);
    Ok((amount / unit + i64::from(amount % unit != 0)).to_string())
}
