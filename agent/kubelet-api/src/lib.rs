//! kubelet's node-local gRPC APIs, generated from the protocol files in `proto/`, which
//! carry kubelet's package, service and message names and field numbers (the wire
//! contract), written for Outpost:
//! - [`deviceplugin::v1beta1`]: the Registration service the agent serves on
//!   `kubelet.sock` in the device-plugin directory, and the DevicePlugin service each
//!   plugin serves on its own socket there (D1, D2);
//! - [`podresources::v1`]: the PodResourcesLister the agent serves on
//!   `pod-resources/kubelet.sock` (D4).
//!
//! Both the client and the server of each service are generated: the agent serves
//! Registration and PodResourcesLister and calls DevicePlugin; the tests' device plugin
//! does the reverse.

/// The protobuf runtime the messages are encoded with.
pub use prost;

/// `deviceplugin/v1beta1`.
pub mod deviceplugin {
    pub mod v1beta1 {
        #![allow(missing_debug_implementations, clippy::all)]
        tonic::include_proto!("v1beta1");

        /// The API version a plugin registers with (`RegisterRequest.version`).
        pub const VERSION: &str = "v1beta1";
        /// The Registration service's socket, in the device-plugin directory.
        pub const KUBELET_SOCKET: &str = "kubelet.sock";
        /// A device's `health` when it can be allocated.
        pub const HEALTHY: &str = "Healthy";
        /// A device's `health` when it cannot.
        pub const UNHEALTHY: &str = "Unhealthy";
    }
}

/// `podresources/v1`.
pub mod podresources {
    pub mod v1 {
        #![allow(missing_debug_implementations, clippy::all)]
        tonic::include_proto!("v1");
    }
}
