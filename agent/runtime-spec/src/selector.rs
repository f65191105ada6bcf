//! The downward API's selectors, read alike by a container's environment (`env`) and by
//! a downwardAPI volume's files (`projection`): the key of a map in a field path
//! (`metadata.labels['KEY']`), and a container's resource (`resourceFieldRef`).

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};

use super::{Error, Quantity, Result, Subject, resources};

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
    let Some(set) = resources::quantity_of(target, kind, resource_name) else {
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
