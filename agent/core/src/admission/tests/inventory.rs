//! Every field of k8s-openapi's pod spec has a line in the table: a field a new
//! k8s-openapi adds fails here until it is classified.

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, PodOS, PodSecurityContext,
    PodSpec, ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{self, Deserialize, Deserializer, Visitor};

use super::super::table::{CONTAINER, POD, Table};
use super::Pod;

/// A deserializer that only records the field names a struct asks for.
struct FieldNames(&'static [&'static str]);

impl<'de> Deserializer<'de> for &mut FieldNames {
    type Error = de::value::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = fields;
        Err(de::Error::custom("only the field names were wanted"))
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The JSON names of a k8s-openapi struct's fields.
fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut names = FieldNames(&[]);
    let _ = T::deserialize(&mut names);
    assert!(!names.0.is_empty(), "{} has no fields", std::any::type_name::<T>());
    names.0
}

/// Each struct of the pod spec and the path its fields have in a table.
fn structs() -> Vec<(&'static [&'static str], Table, &'static str)> {
    vec![
        (field_names::<Pod>(), POD, ""),
        (field_names::<ObjectMeta>(), POD, "metadata."),
        (field_names::<PodSpec>(), POD, "spec."),
        (field_names::<PodOS>(), POD, "spec.os."),
        (field_names::<PodSecurityContext>(), POD, "spec.securityContext."),
        (field_names::<ResourceRequirements>(), POD, "spec.resources."),
        (field_names::<Volume>(), POD, "spec.volumes[]."),
        (field_names::<Container>(), CONTAINER, ""),
        (field_names::<EnvVar>(), CONTAINER, "env[]."),
        (field_names::<EnvVarSource>(), CONTAINER, "env[].valueFrom."),
        (field_names::<ContainerPort>(), CONTAINER, "ports[]."),
        (field_names::<ResourceRequirements>(), CONTAINER, "resources."),
        (field_names::<SecurityContext>(), CONTAINER, "securityContext."),
        (field_names::<Capabilities>(), CONTAINER, "securityContext.capabilities."),
        (field_names::<VolumeMount>(), CONTAINER, "volumeMounts[]."),
    ]
}

#[test]
fn a1_every_field_of_the_pod_spec_is_classified() {
    let structs = structs();
    let mut missing = Vec::new();
    for (names, table, prefix) in &structs {
        for name in *names {
            let path = format!("{prefix}{name}");
            let has_line = table.iter().any(|(p, _)| *p == path);
            // A field without a line is walked into: its struct must be listed above.
            let walked = [format!("{path}."), format!("{path}[].")].into_iter().any(|inner| {
                structs.iter().any(|(_, t, p)| std::ptr::eq(*t, *table) && *p == inner)
            });
            if !has_line && !walked {
                missing.push(path);
            }
        }
    }
    assert!(missing.is_empty(), "fields without a line in the admission table: {missing:?}");
}

#[test]
fn every_line_of_the_table_is_a_field_of_the_pod_spec() {
    let structs = structs();
    let known = |table: Table, path: &str| {
        structs.iter().any(|(names, t, prefix)| {
            std::ptr::eq(*t, table)
                && path.strip_prefix(prefix).is_some_and(|name| names.contains(&name))
        })
    };
    for table in [POD, CONTAINER] {
        for (path, _) in table {
            assert!(known(table, path), "{path} is not a field of k8s-openapi's pod spec");
        }
    }
}
