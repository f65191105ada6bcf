//! Kernel watches on manifest directories.
