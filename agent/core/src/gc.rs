//! Garbage collection and local storage, decided without IO (G1): which dead containers
//! go ([`containers`]), which images go when the image filesystem fills up or they are
//! unused too long ([`images`]), and whether a pod went past its ephemeral-storage limits
//! ([`storage`]). The agent lists, measures and removes; these functions only choose.

pub mod containers;
pub mod images;
pub mod storage;
