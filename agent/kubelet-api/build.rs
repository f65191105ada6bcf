//! Generates the gRPC services of kubelet's node-local APIs from `proto/` (protoc is on
//! `PATH`: the README's setup installs it, as containerd-client's build needs it too).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure().compile_protos(
        &["proto/deviceplugin/v1beta1/api.proto", "proto/podresources/v1/api.proto"],
        &["proto"],
    )?;
    Ok(())
}
