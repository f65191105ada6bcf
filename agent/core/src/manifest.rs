//! Decoding, defaulting (S1–S11) and validation of static pod manifests.
