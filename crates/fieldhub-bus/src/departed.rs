//! The names of ports that have left, for the web monitor's trace.
//!
//! A frame names its sender by port id; the page turns the id into the
//! port's name. A port that sends and leaves within a second (a test
//! script, `cansend`) is gone from every list the page polls before it asks,
//! so the bus keeps the names of the last [`DEPARTED_KEPT`] ports that left.
//! Client port ids are never reused ([`crate::port_id`]), so an id names
//! one port for the hub's life and a kept name is never another port's.
//!
//! Invariants: bounded (the oldest name is forgotten first); remembering a
//! port moves its name in and, once the table is full, allocates nothing
//! (both containers are sized at construction) — a hub whose clients come
//! and go for ever keeps the same memory.

use std::collections::{HashMap, VecDeque};

use crate::port_id::PortId;

/// How many departed ports' names the bus keeps: far more than leave
/// between two of the monitor's 40 ms ticks on any real bench.
pub const DEPARTED_KEPT: usize = 1024;

/// The names of the ports that left most recently, oldest first out.
#[derive(Debug)]
pub struct DepartedPorts {
    order: VecDeque<PortId>,
    names: HashMap<PortId, String>,
}

impl Default for DepartedPorts {
    fn default() -> Self {
        // Twice the entries: a map that removes and inserts for ever
        // reclaims its deleted slots in place only while it is at most half
        // full; fuller, it would grow once more.
        Self { order: VecDeque::with_capacity(DEPARTED_KEPT), names: HashMap::with_capacity(2 * DEPARTED_KEPT) }
    }
}

impl DepartedPorts {
    /// Keep `name` as the name of `port`, which has left; forgets the
    /// oldest name when [`DEPARTED_KEPT`] are kept.
    pub fn remember(&mut self, port: PortId, name: String) {
        if self.order.len() == DEPARTED_KEPT {
            if let Some(oldest) = self.order.pop_front() {
                self.names.remove(&oldest);
            }
        }
        if self.names.insert(port, name).is_none() {
            self.order.push_back(port);
        }
    }

    /// The name `port` had, if it left recently enough to be kept.
    pub fn name(&self, port: PortId) -> Option<&str> {
        self.names.get(&port).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(n: u32) -> PortId {
        PortId::client(n).unwrap()
    }

    #[test]
    fn the_newest_names_are_kept_and_the_oldest_forgotten() {
        let mut departed = DepartedPorts::default();
        for n in 1..=(DEPARTED_KEPT as u32 + 10) {
            departed.remember(port(n), format!("p{n}"));
        }
        assert_eq!(departed.name(port(10)), None, "forgotten: 1,034 left after it");
        assert_eq!(departed.name(port(11)), Some("p11"), "the oldest kept");
        assert_eq!(departed.name(port(DEPARTED_KEPT as u32 + 10)), Some("p1034"));
        assert_eq!((departed.order.len(), departed.names.len()), (DEPARTED_KEPT, DEPARTED_KEPT));
    }

    #[test]
    fn a_full_table_keeps_its_first_allocation() {
        let mut departed = DepartedPorts::default();
        let (order, names) = (departed.order.capacity(), departed.names.capacity());
        for n in 1..=(10 * DEPARTED_KEPT as u32) {
            departed.remember(port(n), String::new());
            // The map's capacity dips while removed entries await reuse; it
            // never grows past the first allocation.
            assert!(departed.order.capacity() == order && departed.names.capacity() <= names, "at port {n}");
        }
    }
}
