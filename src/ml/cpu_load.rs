//! The CPU thread count that fits the load: when other processes keep some
//! of this process's CPUs busy, a graph computes on fewer threads.
//!
//! ggml's threads meet at a barrier after every node, so a graph goes at
//! the pace of its slowest thread; on a core shared with another busy
//! process that thread runs half the time, and so does the whole graph.
//! Beside one busy loop on 2 cores, 2 threads decoded at 0.33x their quiet
//! speed, one thread at 0.7x (docs/notes/barrier.md). The backend therefore
//! measures, every [`WINDOW`] or more, how many of its CPUs other processes
//! used (the busy time of those CPUs in `/proc/stat`, less this process's
//! own CPU time) and computes on the CPUs left, between 1 and the thread
//! count it was made with. Only a backend whose thread count was left to
//! the default adapts; an explicit count is used as given.
//!
//! The thread count does not change results: every ggml CPU kernel gives
//! each output element to one thread (checked on the parity models, 1
//! against 2 threads, bit for bit).

use std::time::{Duration, Instant};

/// The shortest window the load is averaged over. `/proc/stat` counts in
/// 10 ms ticks per CPU; 250 ms on 2 CPUs is 50 ticks, a resolution of 0.04
/// CPUs.
pub const WINDOW: Duration = Duration::from_millis(250);

/// A load gauge for one backend: the last sample and the count chosen.
pub struct CpuLoad {
    cpus: Vec<usize>,
    last: Option<Sample>,
    threads: usize,
}

#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    /// Busy time of the affinity CPUs, seconds.
    busy: f64,
    /// This process's CPU time, seconds.
    own: f64,
}

impl CpuLoad {
    /// A gauge over the CPUs this process may run on, starting at `max`
    /// threads.
    pub fn new(max: usize) -> CpuLoad {
        let mut g = CpuLoad { cpus: super::threads::affinity_list(), last: None, threads: max };
        g.last = g.sample();
        g
    }

    /// The thread count for the next graph, at most `max`: unchanged until
    /// a window has passed since the last measurement, then the CPUs that
    /// other processes left free in that window.
    pub fn threads(&mut self, max: usize) -> usize {
        let Some(prev) = self.last else { return max };
        if prev.at.elapsed() < WINDOW {
            return self.threads.min(max);
        }
        let Some(now) = self.sample() else { return max };
        let wall = now.at.duration_since(prev.at).as_secs_f64();
        let others = ((now.busy - prev.busy) - (now.own - prev.own)) / wall;
        self.last = Some(now);
        self.threads = threads_for(self.cpus.len(), others, max);
        self.threads
    }

    fn sample(&self) -> Option<Sample> {
        let at = Instant::now();
        let busy = busy_seconds(&std::fs::read_to_string("/proc/stat").ok()?, &self.cpus)?;
        Some(Sample { at, busy, own: process_cpu_seconds()? })
    }
}

/// Threads for `cpus` CPUs of which other processes keep `others` busy:
/// the CPUs left, rounded to the nearest, between 1 and `max`.
pub fn threads_for(cpus: usize, others: f64, max: usize) -> usize {
    let free = cpus as f64 - others.max(0.0);
    (free.round().max(1.0) as usize).min(max).max(1)
}

/// The busy seconds (user, nice, system, irq, softirq; not idle, iowait or
/// steal) summed over the `cpuN` lines of `/proc/stat` for the CPUs in
/// `cpus`. Guest time is already part of user time.
pub fn busy_seconds(stat: &str, cpus: &[usize]) -> Option<f64> {
    let tick = clock_ticks()?;
    let mut ticks: u64 = 0;
    let mut seen = 0;
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(id) = f.next().and_then(|c| c.strip_prefix("cpu")).and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        if !cpus.contains(&id) {
            continue;
        }
        let v: Vec<u64> = f.take(7).map(|x| x.parse().unwrap_or(0)).collect();
        if v.len() < 7 {
            return None;
        }
        // user nice system idle iowait irq softirq
        ticks += v[0] + v[1] + v[2] + v[5] + v[6];
        seen += 1;
    }
    (seen > 0).then(|| ticks as f64 / tick)
}

fn clock_ticks() -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (t > 0).then_some(t as f64)
}

fn process_cpu_seconds() -> Option<f64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_for_the_free_cpus() {
        assert_eq!(threads_for(2, 0.0, 2), 2);
        assert_eq!(threads_for(2, 0.4, 2), 2);
        assert_eq!(threads_for(2, 0.6, 2), 1);
        assert_eq!(threads_for(2, 1.0, 2), 1);
        assert_eq!(threads_for(2, 3.0, 2), 1);
        assert_eq!(threads_for(16, 1.0, 8), 8);
        assert_eq!(threads_for(16, 10.2, 8), 6);
        assert_eq!(threads_for(4, -0.3, 4), 4);
    }

    #[test]
    fn busy_seconds_sums_the_chosen_cpus() {
        let stat = "cpu  100 0 50 1000 5 1 1 7 0 0\n\
                    cpu0 60 0 30 500 2 1 0 3 0 0\n\
                    cpu1 40 0 20 500 3 0 1 4 0 0\n\
                    intr 1 2 3\n";
        let hz = clock_ticks().unwrap();
        assert_eq!(busy_seconds(stat, &[0]).unwrap(), 91.0 / hz);
        assert_eq!(busy_seconds(stat, &[0, 1]).unwrap(), 152.0 / hz);
        assert_eq!(busy_seconds(stat, &[5]), None);
        assert_eq!(busy_seconds("cpu0 1 2\n", &[0]), None);
    }
}
