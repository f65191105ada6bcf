//! Issue 5 sync tests: sync_node (to be written).
