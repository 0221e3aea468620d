//! Independent runs side by side. The rows of an experiment (and the checks of a training run)
//! are separate simulations, each seeded on its own and sharing nothing mutable, so running
//! them on threads of their own changes no figure: only the wall time, on a machine with more
//! than one core. Plain scoped threads, not rayon's pool: `RAYON_NUM_THREADS=1` (how the
//! small-network benchmarks are run) sizes burn's kernels, not this.

/// `side` on a thread of its own while `main` runs on this one; both results, once both have
/// finished (an error on one side is seen only then). A panic in `side` goes on in the caller.
pub fn beside<A: Send, B>(side: impl FnOnce() -> A + Send, main: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(|s| {
        let side = s.spawn(side);
        let main = main();
        (join(side), main)
    })
}

/// A scoped thread's result; its panic goes on in the caller.
pub fn join<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_run_and_their_results_come_back_in_place() {
        let data = [1u64, 2, 3];
        let (side, main) = beside(|| data.iter().sum::<u64>(), || data.iter().product::<u64>());
        assert_eq!((side, main), (6, 6));
        let (a, b) = beside(|| std::thread::current().id(), || std::thread::current().id());
        assert_ne!(a, b, "the side runs on another thread");
    }

    #[test]
    #[should_panic(expected = "side failed")]
    fn a_panic_on_the_side_reaches_the_caller() {
        beside(|| panic!("side failed"), || ());
    }
}
