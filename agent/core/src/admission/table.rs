//! The pod spec, field by field: what Outpost does with each. Adding a field is one line.
//!
//! Paths are JSON names joined by `.`, a list's items as `[]`. A field without a line
//! is walked into when lines exist under it, else refused as unknown. `Refused` texts
//! follow "`<field>`: not supported: ", and say what to do instead.

use serde_json::Value;

use super::Class;
use super::review::Review;
use super::{checks, restart};

/// What Outpost does with a field.
#[derive(Clone, Copy)]
pub(super) enum Rule {
    /// Honoured as kubelet honours it.
    Supported,
    /// Ignored, as kubelet ignores it.
    Ignored,
    /// Refused when set: why, and what to do.
    Refused(&'static str),
    /// Decided by its value (and the node); the class is the book's.
    Check(Class, CheckFn),
    /// A reference to an API object (ConfigMap, Secret, service-account token,
    /// PersistentVolumeClaim): honoured
    /// for pods from the API server, refused for static pods (V2).
    ApiObject,
    /// A list of containers, each walked against [`CONTAINER`].
    Containers { init: bool },
    /// The pod's annotations, each looked up in [`ANNOTATIONS`].
    Annotations,
}

/// A check of a field's value: adds findings to the review.
pub(super) type CheckFn = fn(&mut Review<'_>, &str, &Value);

pub(super) type Table = &'static [(&'static str, Rule)];

impl Rule {
    pub(super) fn class(self) -> Class {
        match self {
            Rule::Supported | Rule::ApiObject | Rule::Containers { .. } | Rule::Annotations => {
                Class::Supported
            }
            Rule::Ignored => Class::Ignored,
            Rule::Refused(_) => Class::Refused,
            Rule::Check(class, _) => class,
        }
    }
}

use Class::{Refused as R, Supported as S};
use Rule::{ApiObject, Check, Ignored, Refused, Supported};

const VOLUME: &str = "Outpost has no volume plugins for network or cloud storage (no CSI \
driver registry, no in-tree cloud or network mounters; kubelet has them migrated to CSI drivers \
that a node-local agent cannot run); mount the storage on the host (fstab, a systemd mount unit) \
and use a hostPath volume";
const DRA: &str = "dynamic resource allocation needs the kubelet plugin API (DRA drivers \
registering over gRPC) and ResourceClaims allocated by the control plane's scheduler, which \
Outpost has neither of; request the device from a device plugin (extended resources, D1, D2) or \
mount it with a hostPath volume";
/// The pod, outside its containers.
#[rustfmt::skip]
pub(super) const POD: Table = &[
    ("apiVersion", Supported),
    ("kind", Supported),
    ("metadata.annotations", Rule::Annotations),
    ("metadata.creationTimestamp", Ignored),
    ("metadata.deletionGracePeriodSeconds", Ignored),
    ("metadata.deletionTimestamp", Ignored),
    ("metadata.finalizers", Ignored),
    ("metadata.generateName", Ignored),
    ("metadata.generation", Ignored),
    ("metadata.labels", Supported),
    ("metadata.managedFields", Ignored),
    ("metadata.name", Supported),
    ("metadata.namespace", Supported),
    ("metadata.ownerReferences", Ignored),
    ("metadata.resourceVersion", Ignored),
    ("metadata.selfLink", Ignored),
    ("metadata.uid", Supported),
    ("spec.activeDeadlineSeconds", Supported),
    // K4: required node affinity is checked at the node's admission (node_admission).
    ("spec.affinity", Supported),
    ("spec.automountServiceAccountToken", Ignored),
    ("spec.containers", Rule::Containers { init: false }),
    ("spec.dnsConfig", Supported),
    ("spec.dnsPolicy", Check(S, checks::dns_policy)),
    // K1: the Service variables (the agent's `objects`).
    ("spec.enableServiceLinks", Supported),
    // X1, X2: each walked as a container, without what the API server forbids.
    ("spec.ephemeralContainers", Check(S, super::ephemeral::containers)),
    ("spec.evictionResponders", Refused("eviction responders answer EvictionRequests through the API server's Eviction API, which this node has no controller for (and a static pod cannot be evicted through the API at all); remove them")),
    ("spec.hostAliases", Supported),
    ("spec.hostIPC", Supported),
    ("spec.hostNetwork", Supported),
    ("spec.hostPID", Supported),
    ("spec.hostUsers", Check(R, checks::host_users)),
    ("spec.hostname", Supported),
    ("spec.hostnameOverride", Supported),
    ("spec.imagePullSecrets", ApiObject),
    ("spec.initContainers", Rule::Containers { init: true }),
    ("spec.nodeName", Supported),
    ("spec.nodeSelector", Supported),
    ("spec.os.name", Check(S, checks::os)),
    ("spec.overhead", Supported),
    ("spec.preemptionPolicy", Ignored),
    ("spec.priority", Supported),
    ("spec.priorityClassName", Check(S, checks::priority_class)),
    ("spec.readinessGates", Check(S, checks::readiness_gates)),
    ("spec.resourceClaims", Refused(DRA)),
    ("spec.resources.claims", Refused(DRA)),
    ("spec.resources.limits", Check(S, checks::pod_resources)),
    ("spec.resources.requests", Check(S, checks::pod_resources)),
    ("spec.restartPolicy", Supported),
    // D5: a RuntimeClass (API pods) or a handler of the node (static pods).
    ("spec.runtimeClassName", Supported),
    ("spec.schedulerName", Ignored),
    ("spec.schedulingGates", Ignored),
    ("spec.schedulingGroup", Ignored),
    ("spec.securityContext.appArmorProfile", Check(S, checks::apparmor_profile)),
    ("spec.securityContext.fsGroup", Supported),
    ("spec.securityContext.fsGroupChangePolicy", Supported),
    ("spec.securityContext.runAsGroup", Supported),
    ("spec.securityContext.runAsNonRoot", Supported),
    ("spec.securityContext.runAsUser", Supported),
    ("spec.securityContext.seLinuxChangePolicy", Ignored),
    ("spec.securityContext.seLinuxOptions", Check(S, checks::selinux_options)),
    ("spec.securityContext.seccompProfile", Check(S, checks::seccomp_profile)),
    ("spec.securityContext.supplementalGroups", Supported),
    ("spec.securityContext.supplementalGroupsPolicy", Check(S, checks::supplemental_groups_policy)),
    ("spec.securityContext.sysctls", Check(S, checks::sysctls)),
    ("spec.securityContext.windowsOptions", Ignored),
    ("spec.serviceAccount", Supported),
    ("spec.serviceAccountName", Supported),
    ("spec.setHostnameAsFQDN", Supported),
    ("spec.shareProcessNamespace", Check(S, checks::share_process_namespace)),
    ("spec.subdomain", Supported),
    ("spec.terminationGracePeriodSeconds", Supported),
    ("spec.tolerations", Supported),
    ("spec.topologySpreadConstraints", Ignored),
    ("spec.volumes[].awsElasticBlockStore", Refused(VOLUME)),
    ("spec.volumes[].azureDisk", Refused(VOLUME)),
    ("spec.volumes[].azureFile", Refused(VOLUME)),
    ("spec.volumes[].cephfs", Refused(VOLUME)),
    ("spec.volumes[].cinder", Refused(VOLUME)),
    ("spec.volumes[].configMap", ApiObject),
    ("spec.volumes[].csi", Refused(VOLUME)),
    ("spec.volumes[].downwardAPI", Supported),
    ("spec.volumes[].emptyDir", Supported),
    ("spec.volumes[].ephemeral", ApiObject),
    ("spec.volumes[].fc", Refused(VOLUME)),
    ("spec.volumes[].flexVolume", Refused(VOLUME)),
    ("spec.volumes[].flocker", Refused(VOLUME)),
    ("spec.volumes[].gcePersistentDisk", Refused(VOLUME)),
    ("spec.volumes[].gitRepo", Refused("gitRepo volumes run the host's git on the pod's behalf (CVE-2024-10220) and are deprecated; Outpost runs no host commands for a pod; clone into an emptyDir with an init container")),
    ("spec.volumes[].glusterfs", Refused(VOLUME)),
    ("spec.volumes[].hostPath", Supported),
    ("spec.volumes[].image", Check(S, checks::image_volume)),
    ("spec.volumes[].iscsi", Refused(VOLUME)),
    ("spec.volumes[].name", Supported),
    ("spec.volumes[].nfs", Refused(VOLUME)),
    ("spec.volumes[].persistentVolumeClaim", ApiObject),
    ("spec.volumes[].photonPersistentDisk", Refused(VOLUME)),
    ("spec.volumes[].portworxVolume", Refused(VOLUME)),
    ("spec.volumes[].projected", Check(S, checks::projected)),
    ("spec.volumes[].quobyte", Refused(VOLUME)),
    ("spec.volumes[].rbd", Refused(VOLUME)),
    ("spec.volumes[].scaleIO", Refused(VOLUME)),
    ("spec.volumes[].secret", ApiObject),
    ("spec.volumes[].storageos", Refused(VOLUME)),
    ("spec.volumes[].vsphereVolume", Refused(VOLUME)),
    ("status", Ignored),
];

/// A container's (and init container's) fields, relative to it.
#[rustfmt::skip]
pub(super) const CONTAINER: Table = &[
    ("args", Supported),
    ("command", Supported),
    ("env[].name", Supported),
    ("env[].value", Supported),
    ("env[].valueFrom.configMapKeyRef", ApiObject),
    ("env[].valueFrom.fieldRef", Supported),
    ("env[].valueFrom.fileKeyRef", Supported),
    ("env[].valueFrom.resourceFieldRef", Supported),
    ("env[].valueFrom.secretKeyRef", ApiObject),
    ("envFrom", ApiObject),
    ("image", Supported),
    ("imagePullPolicy", Supported),
    ("lifecycle", Supported),
    ("livenessProbe", Supported),
    ("name", Supported),
    ("ports[].containerPort", Supported),
    ("ports[].hostIP", Supported),
    ("ports[].hostPort", Supported),
    ("ports[].name", Supported),
    ("ports[].protocol", Supported),
    ("readinessProbe", Supported),
    ("resizePolicy", Check(S, checks::resize_policy)),
    ("resources.claims", Refused(DRA)),
    ("resources.limits", Check(S, checks::resources)),
    ("resources.requests", Check(S, checks::resources)),
    ("restartPolicy", Check(S, restart::policy)),
    ("restartPolicyRules", Check(S, restart::rules)),
    ("securityContext.allowPrivilegeEscalation", Supported),
    ("securityContext.appArmorProfile", Check(S, checks::apparmor_profile)),
    ("securityContext.capabilities.add", Supported),
    ("securityContext.capabilities.drop", Supported),
    ("securityContext.privileged", Supported),
    ("securityContext.procMount", Check(S, checks::proc_mount)),
    ("securityContext.readOnlyRootFilesystem", Supported),
    ("securityContext.runAsGroup", Supported),
    ("securityContext.runAsNonRoot", Supported),
    ("securityContext.runAsUser", Supported),
    ("securityContext.seLinuxOptions", Check(S, checks::selinux_options)),
    ("securityContext.seccompProfile", Check(S, checks::seccomp_profile)),
    ("securityContext.windowsOptions", Ignored),
    ("startupProbe", Supported),
    ("stdin", Supported),
    ("stdinOnce", Supported),
    ("terminationMessagePath", Supported),
    ("terminationMessagePolicy", Supported),
    ("tty", Supported),
    // K3: raw block volumes of the pod's claims (API pods only, V2).
    ("volumeDevices", Check(S, checks::volume_devices)),
    ("volumeMounts[].bindMountOptions", Refused("bind mount options are an alpha field kubelet 1.37 passes to CRI runtimes as mount options; Outpost's mounts take none besides ro, propagation and recursive read-only; remove them")),
    ("volumeMounts[].mountPath", Supported),
    ("volumeMounts[].mountPropagation", Check(S, checks::mount_propagation)),
    ("volumeMounts[].name", Supported),
    ("volumeMounts[].readOnly", Supported),
    ("volumeMounts[].recursiveReadOnly", Check(S, checks::recursive_read_only)),
    ("volumeMounts[].subPath", Supported),
    ("volumeMounts[].subPathExpr", Supported),
    ("workingDir", Supported),
];

/// Annotations that change what runs (a key ending in `*` is a prefix); others are data.
#[rustfmt::skip]
pub(super) const ANNOTATIONS: Table = &[
    ("container.apparmor.security.beta.kubernetes.io/*", Check(S, checks::apparmor_annotation)),
    ("container.seccomp.security.alpha.kubernetes.io/*", Check(S, checks::seccomp_annotation)),
    ("seccomp.security.alpha.kubernetes.io/pod", Check(S, checks::seccomp_annotation)),
    // D3: CDI device names, injected when a container is created.
    ("cdi.k8s.io/*", Supported),
];
