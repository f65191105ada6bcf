//! Counting the local API's connections, in all and per client address, against caps
//! ([`Limits`]); a [`Slot`] holds one connection's place until dropped. No IO here.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub total: usize,
    pub per_ip: usize,
}

/// The connections open now.
#[derive(Debug)]
pub struct Connections {
    limits: Limits,
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

impl Connections {
    pub fn new(limits: Limits) -> Connections {
        Connections { limits, total: 0, per_ip: HashMap::new() }
    }

    /// Counts a new connection from `ip`, unless that would go over a cap.
    pub fn add(&mut self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let from_ip = self.per_ip.get(&ip).copied().unwrap_or(0);
        if self.total >= self.limits.total || from_ip >= self.limits.per_ip {
            return false;
        }
        self.total += 1;
        self.per_ip.insert(ip, from_ip + 1);
        true
    }

    /// Forgets a connection [`Connections::add`] counted.
    pub fn remove(&mut self, ip: IpAddr) {
        let ip = ip.to_canonical();
        if let Some(count) = self.per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&ip);
            }
            self.total -= 1;
        }
    }

    /// Connections open now, in all.
    pub fn total(&self) -> usize {
        self.total
    }
}

/// One connection's place, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    connections: Arc<Mutex<Connections>>,
    ip: IpAddr,
}

impl Slot {
    /// A place for a connection from `ip`, if the caps allow one.
    pub fn take(connections: &Arc<Mutex<Connections>>, ip: IpAddr) -> Option<Slot> {
        let added = connections.lock().is_ok_and(|mut c| c.add(ip));
        added.then(|| Slot { connections: connections.clone(), ip })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut connections) = self.connections.lock() {
            connections.remove(self.ip);
        }
    }
}

#[cfg(test)]
mod tests;
