//! A slot table: values addressed by a small index, with freed slots reused.
//!
//! The hub keeps each kind of live thing (connections in the reactor,
//! channels and routes on the bus) in one table, so an index is a direct
//! lookup, memory stays bounded by the most ever live at once, and a
//! create/delete cycle can run forever without exhausting ids.

/// Values in reusable slots.
#[derive(Debug)]
pub struct SlotTable<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Default for SlotTable<T> {
    fn default() -> Self {
        Self { slots: Vec::new(), free: Vec::new() }
    }
}

impl<T> SlotTable<T> {
    /// Store `value` in a free slot (the lowest freed one first); returns its index.
    pub fn insert(&mut self, value: T) -> usize {
        match self.free.pop() {
            Some(index) => {
                self.slots[index] = Some(value);
                index
            }
            None => {
                self.slots.push(Some(value));
                self.slots.len() - 1
            }
        }
    }

    /// The index the next [`SlotTable::insert`] will use.
    pub fn next_index(&self) -> usize {
        self.free.last().copied().unwrap_or(self.slots.len())
    }

    /// Take the value out of slot `index`, freeing the slot.
    pub fn remove(&mut self, index: usize) -> Option<T> {
        let value = self.slots.get_mut(index)?.take()?;
        self.free.push(index);
        // Lowest first, so ids stay small and predictable.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
        Some(value)
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        self.slots.get(index)?.as_ref()
    }

    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.slots.get_mut(index)?.as_mut()
    }

    /// Live values with their indices, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| Some((i, s.as_ref()?)))
    }

    /// Live values with their indices, in index order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> {
        self.slots.iter_mut().enumerate().filter_map(|(i, s)| Some((i, s.as_mut()?)))
    }

    /// Indices of live values, in order (a snapshot).
    pub fn indices(&self) -> Vec<usize> {
        self.iter().map(|(i, _)| i).collect()
    }

    /// Live values.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots ever used: indices are below this.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Take every value out.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.free.clear();
        self.slots.drain(..).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_slots_are_reused_lowest_first_so_cycles_never_exhaust_ids() {
        let mut table = SlotTable::default();
        let a = table.insert("a");
        let b = table.insert("b");
        let c = table.insert("c");
        assert_eq!((a, b, c), (0, 1, 2));
        table.remove(2);
        table.remove(0);
        assert_eq!(table.next_index(), 0);
        assert_eq!(table.insert("d"), 0);
        assert_eq!(table.insert("e"), 2);
        for _ in 0..100_000 {
            let i = table.insert("x");
            assert_eq!(i, 3);
            table.remove(i);
        }
        assert_eq!(table.capacity(), 4);
        assert_eq!(table.iter().map(|(_, v)| *v).collect::<Vec<_>>(), ["d", "b", "e"]);
    }
}
