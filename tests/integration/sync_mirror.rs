//! Issue 5 sync tests: sync_mirror (to be written).
