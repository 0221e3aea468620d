//! Busy-polling: keeping a single-threaded runtime awake for a short window after each call.
//!
//! One sequential client pays two thread wake-ups per round trip (the server's, then its own).
//! On virtual machines a wake-up of a sleeping CPU costs tens of microseconds, more than the
//! call itself: a plain blocking TCP ping-pong between two threads manages ~18,500 round trips/s
//! on the 2-core development VM, ~147,000/s when both sides poll instead of sleeping. Polling
//! the sockets without sleeping for a bounded window after each call removes that cost for a
//! client that calls again soon, and costs at most the window's CPU time per call when it does
//! not. It is off by default on both sides: a server with many clients is better served by
//! several worker threads than by one that polls.
//!
//! Both halves rely on tokio's cooperative yield: a task that yields on a current-thread
//! runtime makes the runtime poll its I/O driver with a zero timeout instead of sleeping.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The server's half: request handlers [`touch`](Activity::touch) it, and the task of
/// [`Activity::spin`] keeps the runtime polling until `window` has passed since the last touch.
#[derive(Debug)]
pub(crate) struct Activity {
    epoch: Instant,
    /// Nanoseconds from `epoch` to the last touch.
    last: AtomicU64,
    window: Duration,
    wake: Notify,
}

impl Activity {
    pub(crate) fn new(window: Duration) -> Arc<Self> {
        Arc::new(Self { epoch: Instant::now(), last: AtomicU64::new(0), window, wake: Notify::new() })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A call arrived: poll for another `window` from now.
    pub(crate) fn touch(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
        self.wake.notify_one();
    }

    fn recent(&self) -> bool {
        self.now().saturating_sub(self.last.load(Ordering::Relaxed)) < self.window.as_nanos() as u64
    }

    /// Runs forever (abort it to stop): yields while a call was recent, sleeps otherwise.
    pub(crate) async fn spin(self: Arc<Self>) {
        loop {
            if self.recent() {
                tokio::task::yield_now().await;
            } else {
                self.wake.notified().await;
            }
        }
    }
}

/// The client's half: awaits `f`, polling without sleeping for up to `budget`, then waiting
/// normally. Run it with `block_on` on a current-thread runtime.
pub(crate) async fn spin_on<F: Future>(f: F, budget: Duration) -> F::Output {
    let mut f = pin!(f);
    if !budget.is_zero() {
        let start = Instant::now();
        while start.elapsed() < budget {
            if let Poll::Ready(out) = std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await {
                return out;
            }
            tokio::task::yield_now().await;
        }
    }
    f.await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_on_returns_what_the_future_returns_within_and_after_the_budget() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert_eq!(rt.block_on(spin_on(async { 7 }, Duration::from_millis(5))), 7);
        // A future slower than the budget: spins 1 ms, then sleeps until the timer fires.
        let slow = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            8
        };
        let t = Instant::now();
        assert_eq!(rt.block_on(spin_on(slow, Duration::from_millis(1))), 8);
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(rt.block_on(spin_on(async { 9 }, Duration::ZERO)), 9);
    }

    #[test]
    fn activity_is_recent_only_within_its_window() {
        let long = Activity::new(Duration::from_secs(3600));
        long.touch();
        assert!(long.recent());
        let short = Activity::new(Duration::from_micros(1));
        short.touch();
        std::thread::sleep(Duration::from_millis(2));
        assert!(!short.recent());
    }
}
