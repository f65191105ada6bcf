//! The merge core.
