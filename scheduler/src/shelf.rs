//! A list kept in order with room at its head as well as at its tail, so that putting an entry in
//! or taking one out moves whichever side of it is shorter. A leaf's waiting work (see `lineup`)
//! loses entries near its head, where work starts, and gains them near its tail, where work
//! arrives: in a plain `Vec` every start moved the whole list behind it.

use std::ops::{Deref, DerefMut};

/// The entries are `buf[head..]`; `buf[..head]` is room left by entries taken from the head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shelf<T> {
    buf: Vec<T>,
    head: usize,
}

impl<T> Default for Shelf<T> {
    fn default() -> Self {
        Shelf {
            buf: Vec::new(),
            head: 0,
        }
    }
}

impl<T: Copy> Shelf<T> {
    pub(crate) fn push(&mut self, value: T) {
        self.buf.push(value);
    }

    /// Puts `value` in at `at` (at most the length), moving the entries before it one place
    /// towards the head where there is room and they are fewer than those after it.
    pub(crate) fn insert(&mut self, at: usize, value: T) {
        assert!(at <= self.len(), "insert at {at} past the end");
        if self.head > 0 && at < self.len() / 2 {
            let from = self.head;
            self.buf.copy_within(from..from + at, from - 1);
            self.head -= 1;
            self.buf[self.head + at] = value;
        } else {
            self.buf.insert(self.head + at, value);
        }
    }

    /// Takes out the entry at `at`, moving whichever side of it is shorter.
    pub(crate) fn remove(&mut self, at: usize) -> T {
        let value = self[at];
        let from = self.head;
        if at < self.len() / 2 {
            self.buf.copy_within(from..from + at, from + 1);
            self.head += 1;
        } else {
            self.buf.remove(from + at);
        }
        // Room at the head beyond the entries themselves is given back.
        if self.head > self.len() {
            self.buf.drain(..self.head);
            self.head = 0;
        }
        value
    }
}

impl<T> Deref for Shelf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.buf[self.head..]
    }
}

impl<T> DerefMut for Shelf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[self.head..]
    }
}

impl<T> FromIterator<T> for Shelf<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Shelf {
            buf: iter.into_iter().collect(),
            head: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies the same inserts and removals to a shelf and a `Vec`, from a seeded sequence.
    #[test]
    fn a_shelf_holds_what_a_vec_holds_through_inserts_and_removals_at_both_ends() {
        let mut shelf: Shelf<u32> = (0..50).collect();
        let mut vec: Vec<u32> = (0..50).collect();
        let mut state: u64 = 7;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize % n.max(1)
        };
        for step in 0..20_000u32 {
            let len = vec.len();
            // Mostly near the head or the tail, as a leaf's queue is used.
            let at = match next(4) {
                0 => next(len.min(3) + 1).min(len),
                1 => len - next(len.min(3) + 1).min(len),
                _ => next(len + 1),
            };
            if next(2) == 0 && len > 0 {
                let at = at.min(len - 1);
                assert_eq!(shelf.remove(at), vec.remove(at));
            } else {
                shelf.insert(at, step);
                vec.insert(at, step);
            }
            assert_eq!(&shelf[..], &vec[..]);
            assert!(shelf.head <= shelf.len(), "room at the head is given back");
        }
    }

    #[test]
    fn taking_from_the_head_moves_nothing_behind_it() {
        let mut shelf: Shelf<u32> = (0..10).collect();
        assert_eq!(shelf.remove(0), 0);
        assert_eq!(shelf.remove(1), 2);
        assert_eq!(shelf.head, 2);
        assert_eq!(&shelf[..], &[1, 3, 4, 5, 6, 7, 8, 9]);
        shelf.insert(0, 0);
        assert_eq!(shelf.head, 1);
        assert_eq!(&shelf[..], &[0, 1, 3, 4, 5, 6, 7, 8, 9]);
    }
}
