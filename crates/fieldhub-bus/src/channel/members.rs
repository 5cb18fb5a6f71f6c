//! The ports on one channel, each in a slot whose index stays its address
//! while it is on the channel: its owner finds it with one lookup per frame,
//! and a port that leaves frees its slot for the next one.
//!
//! Iteration runs in slot order — the one fixed order in which fan-out
//! visits receivers and arbitration breaks exact ties.

use std::ops::{Index, IndexMut};

use crate::member::Member;
use crate::slots::SlotTable;

#[derive(Default)]
pub struct Members {
    slots: SlotTable<Member>,
    /// Lossless ports among them: with none, no frame needs the per-port
    /// look for room that a lossless hold takes.
    lossless: usize,
}

impl Members {
    /// Put a port on the channel; returns its slot.
    pub fn push(&mut self, member: Member) -> usize {
        self.lossless += usize::from(member.is_lossless());
        self.slots.insert(member)
    }

    /// Take the port in `slot` off the channel.
    pub fn remove(&mut self, slot: usize) -> Option<Member> {
        let member = self.slots.remove(slot)?;
        self.lossless -= usize::from(member.is_lossless());
        Some(member)
    }

    /// Whether any port on the channel is lossless.
    pub fn any_lossless(&self) -> bool {
        self.lossless > 0
    }

    pub fn get(&self, slot: usize) -> Option<&Member> {
        self.slots.get(slot)
    }

    pub fn get_mut(&mut self, slot: usize) -> Option<&mut Member> {
        self.slots.get_mut(slot)
    }

    /// The slot of the first port (in slot order) that `test` accepts.
    pub fn find(&self, mut test: impl FnMut(&Member) -> bool) -> Option<usize> {
        self.slots.iter().find(|(_, m)| test(m)).map(|(slot, _)| slot)
    }

    /// The ports, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &Member> {
        self.slots.iter().map(|(_, m)| m)
    }

    /// The ports, in slot order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Member> {
        self.slots.iter_mut().map(|(_, m)| m)
    }

    /// The ports with their slots, in slot order.
    pub fn indexed(&self) -> impl Iterator<Item = (usize, &Member)> {
        self.slots.iter()
    }

    /// The ports with their slots, in slot order.
    pub fn indexed_mut(&mut self) -> impl Iterator<Item = (usize, &mut Member)> {
        self.slots.iter_mut()
    }
}

/// Indexing an empty slot is a bug in the caller, which got the slot from
/// this table and has not removed it since.
impl Index<usize> for Members {
    type Output = Member;
    fn index(&self, slot: usize) -> &Member {
        self.slots.get(slot).unwrap_or_else(|| panic!("no port in slot {slot}"))
    }
}

impl IndexMut<usize> for Members {
    fn index_mut(&mut self, slot: usize) -> &mut Member {
        self.slots.get_mut(slot).unwrap_or_else(|| panic!("no port in slot {slot}"))
    }
}
