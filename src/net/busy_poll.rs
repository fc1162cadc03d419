//! [`BusyPoll`]: a lowest-priority thread that keeps a CPU awake while keel is serving,
//! so the next packet or disk completion finds it running instead of halted.
//!
//! Why: when every keel thread waits (a request's fdatasync, or the gap until a client's
//! next request), the CPU goes idle, and on a virtual machine an idle vCPU halts; the
//! interrupt that ends the wait must then wake it, which costs tens of microseconds on
//! each side of the wait. Measured on the project's Firecracker VM (guest haltpoll at 0
//! ns), one session with one request in flight, with an external SCHED_IDLE spinner on
//! the server's core: get 6.2k -> 9.8k ops/s, set 1.9k -> 2.4k ops/s. Linux's own
//! answer is the same trade (`net.core.busy_poll`, cpuidle haltpoll), but those are
//! settings of the machine; this is keel's.
//!
//! The thread runs under `SCHED_IDLE` (sched(7)): it gets a CPU only when no other
//! thread there wants it, and any waking thread preempts it at once, so it takes no
//! time from keel or from other programs. It polls only while a txn log sync is in
//! flight and for `window_us` after the latest activity (a read from a client, the
//! end of a sync); otherwise it sleeps, so an idle server uses no CPU. Its cost is that
//! CPU time (shown in `top`), up to `window_us` per request on a lightly loaded server.
//! zoo.cfg key `keel.busyPollUs` sets the window; 0 turns the thread off. An ensemble
//! member runs without it unless the key is set (`Config::busy_poll_us`: there it
//! made 1 x 1 writes slower, the CPU it holds being wanted by the other members).
//!
//! It polls only under light load: not while more than [`MAX_POLL_IN_FLIGHT`] client
//! requests are read and unanswered. Under load the CPUs seldom idle long, so there is
//! little to gain, and the polled time is not free to the machine: a virtual machine's
//! host counts it as the guest's CPU time, and a hyperthread sibling loses issue slots
//! to it. Measured in a 3-member ensemble, zkload 4 x 64 through a follower (three set
//! and three mixed phases): the follower's poller used 0.89 s of CPU before this rule
//! and 0.02 s with it; the mixed phase's p99 and throughput did not move beyond the
//! noise (12 alternated runs each). Standalone, where every sync also polls, zkload 4 x
//! 64 (5 alternated runs): sets 124-163k/s before, 170-230k/s after (one outlier run at
//! 62k); mixed 201-267k/s before, 265-321k/s after. 1 x 1 sets, one request in flight,
//! poll as before.
//!
//! Why that CPU matters on the project's Firecracker VM: a guest that uses its whole CPU
//! budget together with disk I/O is stopped by the host for 10-20 ms at a time, both
//! vCPUs at once, on a 100 ms beat aligned to the wall clock (a spinning probe sees the
//! same gaps; so do three plain processes that append and fdatasync in a loop). Each
//! stop holds every request in flight for its whole length; it is what sets the p99 of
//! an ensemble's 4 x 64 mixed phase there.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Instant;

struct Shared {
    /// Polling continues this long after the latest activity, ns.
    window_ns: u64,
    /// The origin of `last_activity_ns`.
    epoch: Instant,
    /// The latest activity, ns since `epoch`.
    last_activity_ns: AtomicU64,
    /// Syncs in flight: the poller polls while any is.
    syncs_in_flight: AtomicUsize,
    /// Client requests read and not yet answered, all connections together.
    requests_in_flight: AtomicUsize,
    /// The poller is asleep (or about to be): activity must wake it.
    parked: AtomicBool,
    /// Set at stop.
    stopping: AtomicBool,
    /// The poller thread, set by itself before it first sleeps. Wake-ups use
    /// `Thread::unpark`, which never blocks: a lock shared with a `SCHED_IDLE` thread
    /// could leave a request waiting for a thread that gets no CPU.
    thread: OnceLock<Thread>,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn busy(&self) -> bool {
        let active = self.syncs_in_flight.load(Ordering::SeqCst) > 0
            || self
                .now_ns()
                .saturating_sub(self.last_activity_ns.load(Ordering::SeqCst))
                < self.window_ns;
        active && self.requests_in_flight.load(Ordering::SeqCst) <= MAX_POLL_IN_FLIGHT
    }

    /// Wakes a sleeping poller, unless there are too many requests in flight for it to
    /// poll (then [`BusyPoll::requests_answered`] wakes it when they are answered). The
    /// SeqCst pair (activity stored before `parked` is read here; `parked` stored
    /// before activity is read in `poll`) means at least one side sees the other, and
    /// an unpark before the park makes the park return at once, so a wake-up is never
    /// lost.
    fn wake_if_parked(&self) {
        if self.requests_in_flight.load(Ordering::SeqCst) > MAX_POLL_IN_FLIGHT {
            // It would look and park again: a futex call for nothing on every request.
            return;
        }
        // The load first: at light load the poller is mostly awake, and a plain read is
        // cheaper than a swap on every request.
        if self.parked.load(Ordering::SeqCst) && self.parked.swap(false, Ordering::SeqCst) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }
}

/// Client requests in flight on this server above which the poller does not poll
/// (module comment). 1 x 1 latency, what the poller is for, has one in flight; a
/// pipelining client's 64 are far above.
pub const MAX_POLL_IN_FLIGHT: usize = 8;

/// A handle to the poller; cheap to clone, shared by connections and sync threads.
/// A disabled one (window 0, or a platform without `SCHED_IDLE`) does nothing.
#[derive(Clone)]
pub struct BusyPoll {
    shared: Option<Arc<Shared>>,
}

/// Ends the poller thread when dropped ([`BusyPoll::start`] returns it with the handle).
pub struct BusyPollThread {
    shared: Option<Arc<Shared>>,
    thread: Option<JoinHandle<()>>,
}

/// Counts one sync in flight until dropped ([`BusyPoll::sync_started`]).
pub struct SyncInFlight<'a> {
    poll: &'a BusyPoll,
}

impl BusyPoll {
    /// Starts the poller thread `keel-busy-poll` with a window of `window_us`
    /// microseconds; a window of 0 starts nothing.
    ///
    /// Errors: the OS refused a thread. If the thread cannot lower itself to
    /// `SCHED_IDLE` it logs a warning and ends, leaving the handle harmless: polling at
    /// normal priority would take CPU time from the server's own threads.
    pub fn start(window_us: u64) -> std::io::Result<(BusyPoll, BusyPollThread)> {
        if window_us == 0 {
            return Ok((
                BusyPoll { shared: None },
                BusyPollThread {
                    shared: None,
                    thread: None,
                },
            ));
        }
        let shared = Arc::new(Shared {
            window_ns: window_us.saturating_mul(1000),
            epoch: Instant::now(),
            last_activity_ns: AtomicU64::new(0),
            syncs_in_flight: AtomicUsize::new(0),
            requests_in_flight: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            thread: OnceLock::new(),
        });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("keel-busy-poll".into())
            .spawn(move || {
                let _ = for_thread.thread.set(std::thread::current());
                if let Err(e) = lowest_priority() {
                    tracing::warn!(error = %e, "keel.busyPollUs: cannot run at SCHED_IDLE priority; not polling");
                    return;
                }
                poll(&for_thread);
            })?;
        Ok((
            BusyPoll {
                shared: Some(Arc::clone(&shared)),
            },
            BusyPollThread {
                shared: Some(shared),
                thread: Some(thread),
            },
        ))
    }

    /// Records activity (a client's bytes arrived): polling goes on for the window.
    pub fn touch(&self) {
        if let Some(s) = &self.shared {
            s.last_activity_ns.store(s.now_ns(), Ordering::SeqCst);
            s.wake_if_parked();
        }
    }

    /// Counts `n` client requests read, unanswered until [`BusyPoll::requests_answered`]
    /// (which the connection must also call for those it drops unanswered).
    pub fn requests_read(&self, n: usize) {
        if let Some(s) = &self.shared {
            s.requests_in_flight.fetch_add(n, Ordering::SeqCst);
        }
    }

    /// Counts `n` of the requests [`BusyPoll::requests_read`] counted as answered. When
    /// this brings the server back to light load within the window, polling resumes.
    pub fn requests_answered(&self, n: usize) {
        if let Some(s) = &self.shared {
            let before = s.requests_in_flight.fetch_sub(n, Ordering::SeqCst);
            if before > MAX_POLL_IN_FLIGHT && before - n <= MAX_POLL_IN_FLIGHT {
                // Now at or below the limit, so wake_if_parked goes ahead.
                s.wake_if_parked();
            }
        }
    }

    /// Marks a txn log sync as started; polling goes on until the returned guard is
    /// dropped and then for the window (the replies follow the sync).
    pub fn sync_started(&self) -> SyncInFlight<'_> {
        if let Some(s) = &self.shared {
            s.syncs_in_flight.fetch_add(1, Ordering::SeqCst);
            s.wake_if_parked();
        }
        SyncInFlight { poll: self }
    }
}

impl Drop for SyncInFlight<'_> {
    fn drop(&mut self) {
        if let Some(s) = &self.poll.shared {
            s.last_activity_ns.store(s.now_ns(), Ordering::SeqCst);
            s.syncs_in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for BusyPollThread {
    fn drop(&mut self) {
        if let Some(s) = &self.shared {
            s.stopping.store(true, Ordering::SeqCst);
            if let Some(t) = s.thread.get() {
                t.unpark();
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn poll(shared: &Shared) {
    loop {
        // Stopping ends a poll at once: a sync in flight at stop (or a window of up to
        // 100 ms) would otherwise hold the join.
        while shared.busy() && !shared.stopping.load(Ordering::Relaxed) {
            // A short pause between checks; reading the clock each time is cheap (vDSO).
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        shared.parked.store(true, Ordering::SeqCst);
        if !shared.busy() && !shared.stopping.load(Ordering::SeqCst) {
            // Returns on an unpark (or spuriously); either way the loop looks again.
            std::thread::park();
        }
        shared.parked.store(false, Ordering::SeqCst);
    }
}

/// Moves the calling thread to `SCHED_IDLE` (sched(7)); an unprivileged thread may.
#[cfg(target_os = "linux")]
fn lowest_priority() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param` only during the call; pid 0 is the
    // calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn lowest_priority() -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "SCHED_IDLE is Linux-only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether the poller goes to sleep within `ms` milliseconds.
    fn parked_within(shared: &Shared, ms: u64) -> bool {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            if shared.parked.load(Ordering::SeqCst) {
                return true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        false
    }

    /// The poller polls after activity and goes back to sleep once the window passes:
    /// `parked` is what an idle server's CPU use depends on.
    #[test]
    fn polls_for_the_window_then_sleeps_and_wakes_again() {
        let (poll, thread) = BusyPoll::start(2_000).unwrap();
        let shared = poll.shared.clone().unwrap();
        let parked_within = |ms| parked_within(&shared, ms);
        // Nothing has happened for far longer than 2 ms since the epoch once it starts.
        assert!(parked_within(2_000), "an idle poller sleeps");
        poll.touch();
        assert!(!shared.parked.load(Ordering::SeqCst), "activity wakes it");
        assert!(parked_within(2_000), "and it sleeps again after the window");
        {
            let _sync = poll.sync_started();
            assert!(!shared.parked.load(Ordering::SeqCst));
            std::thread::sleep(Duration::from_millis(20));
            assert!(
                !shared.parked.load(Ordering::SeqCst),
                "it polls for as long as a sync is in flight, past the window"
            );
        }
        assert!(parked_within(2_000));
        drop(thread);
    }

    /// More than MAX_POLL_IN_FLIGHT requests in flight stop the polling, activity or
    /// not; answers that bring the count back down resume it within the window.
    #[test]
    fn no_polling_while_many_requests_are_in_flight() {
        let (poll, thread) = BusyPoll::start(2_000_000).unwrap();
        let shared = poll.shared.clone().unwrap();
        let parked_within = |ms| parked_within(&shared, ms);
        let polling_after_20ms = || {
            std::thread::sleep(Duration::from_millis(20));
            !shared.parked.load(Ordering::SeqCst)
        };
        poll.touch();
        poll.requests_read(1);
        assert!(polling_after_20ms(), "one in flight: it polls");
        poll.requests_read(MAX_POLL_IN_FLIGHT);
        poll.touch();
        assert!(
            parked_within(2_000),
            "above the limit it sleeps, though within the window (2 s)"
        );
        // Within the window however long the parking above took.
        poll.touch();
        poll.requests_answered(1);
        assert!(
            polling_after_20ms(),
            "back at the limit within the window: it polls again"
        );
        poll.requests_answered(MAX_POLL_IN_FLIGHT);
        drop(thread);
    }

    #[test]
    fn a_zero_window_starts_nothing() {
        let (poll, thread) = BusyPoll::start(0).unwrap();
        assert!(poll.shared.is_none() && thread.thread.is_none());
        poll.touch();
        drop(poll.sync_started());
    }
}
