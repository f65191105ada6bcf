//! Issue 5 sync tests: sync_status (to be written).
