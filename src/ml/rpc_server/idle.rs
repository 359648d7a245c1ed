//! Which connections wait for their next command, and since when: one
//! counter per client slot, in memory the connection processes share with
//! the listener. When every slot is taken and a new client arrives, the
//! listener may take the slot of the connection that has waited longest,
//! if longer than the idle timeout (see `serve`).
//!
//! A slot's word is [`BUSY`] (before HELLO, during a command, or free), a
//! timestamp (the connection waits for a command since then), or
//! [`EVICTED`]. Its process and the listener change it by compare and
//! swap, so a command that has begun is never cut off: either the process
//! marks itself busy first and the listener leaves it, or the listener
//! marks it evicted first and the process ends without running it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BUSY: u64 = 0;
const EVICTED: u64 = u64::MAX;

/// The idle words of all slots.
pub struct Idle {
    words: &'static [AtomicU64],
}

/// One slot's word, as its connection's process sees it.
pub struct Slot {
    word: &'static AtomicU64,
}

/// Milliseconds of the system's monotonic clock (the same in every
/// process), from 1.
fn now_ms() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64) * 1000 + (t.tv_nsec as u64) / 1_000_000 + 1
}

impl Idle {
    pub fn new(slots: usize) -> Result<Idle, String> {
        let words = super::budget::shared_words(slots).map_err(|e| format!("cannot map the idle clocks: {e}"))?;
        Ok(Idle { words })
    }

    pub fn slot(&self, i: usize) -> Slot {
        Slot { word: &self.words[i] }
    }

    /// Marks slot `i` busy: it is free, or about to serve a new client.
    pub fn reset(&self, i: usize) {
        self.words[i].store(BUSY, Ordering::Release);
    }

    /// Claims the slot whose connection has waited longest for a command,
    /// if longer than `limit`: marks it evicted (its process must then be
    /// ended) and returns it with how long it waited.
    pub fn evict_longest(&self, limit: Duration) -> Option<(usize, Duration)> {
        let now = now_ms();
        let limit = limit.as_millis() as u64;
        loop {
            let (i, since) = self
                .words
                .iter()
                .enumerate()
                .map(|(i, w)| (i, w.load(Ordering::Acquire)))
                .filter(|&(_, t)| t != BUSY && t != EVICTED && now.saturating_sub(t) > limit)
                .min_by_key(|&(_, t)| t)?;
            if self.words[i].compare_exchange(since, EVICTED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return Some((i, Duration::from_millis(now.saturating_sub(since))));
            }
            // It began a command meanwhile: look again.
        }
    }
}

impl Slot {
    /// The connection starts waiting for a command. False if it has been
    /// evicted.
    pub fn waiting(&self) -> bool {
        self.word.compare_exchange(BUSY, now_ms(), Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// A command has arrived: the connection is busy. False if it has been
    /// evicted (the command must not run).
    pub fn busy(&self) -> bool {
        let cur = self.word.load(Ordering::Acquire);
        cur != EVICTED && self.word.compare_exchange(cur, BUSY, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}
