//! What the agent reads about its host from the kernel, below every other module:
//! sources, the runtime, BPF, the audit and the metrics may all import it.

pub mod proc;
