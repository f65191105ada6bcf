//! Container images as their tarballs and registries write them: the JSON documents of
//! an image (OCI index, manifest and config; docker-archive's `manifest.json`), the labels
//! containerd's garbage collector follows, chain IDs ([`layout`]), and image references
//! normalized as containerd and docker name them ([`reference`]).

pub mod layout;
pub mod reference;

#[cfg(test)]
mod tests;
