//! Issue 5 sync tests: sync_events (to be written).
