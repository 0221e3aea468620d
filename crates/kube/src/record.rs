//! `aware controller --store URL`: the lifecycle's record of live apps in a trajectory store,
//! as `aware run` keeps it for simulated ones — every decision (who acted, on what, the guard's
//! verdict, the features behind the agent's action), every stage change with its reason, and
//! each app's windows as episodes of its transitions — so that `aware explain --store URL --app
//! NAMESPACE/NAME` answers for an MPA the controller serves.
//!
//! The store's clients block (PostgreSQL's opens a runtime of its own), so they run on a thread
//! of their own: the decider hands each pass's records over a bounded channel and goes on
//! deciding. Starting waits only for the store to open: the thread then reads the fallback's
//! transitions the store holds ([`Demonstrations`], which the decider takes up at the pass
//! after they are read), so that a large store does not keep the controller from serving and
//! deciding, and only then writes, the records handed over meanwhile waiting in the channel.
//! The store is opened behind its on-disk spool ([`aware_store::open_spooled`]):
//! while it is unreachable the records wait there (acknowledged means on disk) and are flushed
//! in order when it returns, at the next write or within [`FLUSH_EVERY`] of quiet. Records are
//! refused, counted and logged, never silently lost, where the spool is full, where the channel
//! is ([`QUEUED_BATCHES`] passes behind: the store far slower than the control loop), and where
//! the store refuses one; a stopping controller waits [`CLOSE_DEADLINE`] for the writer and logs
//! how many passes' records it leaves unwritten.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use aware_agents::Experience;
use aware_lifecycle::live::LiveRecords;
use aware_lifecycle::record::LiveRecorder;
use aware_store::{Spooled, StoreError};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Passes' records waiting for the writer thread at most; beyond, a pass's records are refused.
pub const QUEUED_BATCHES: usize = 4096;
/// How often the writer retries a spool that holds records while no new ones arrive.
pub const FLUSH_EVERY: Duration = Duration::from_secs(30);
/// How long a stopping controller waits for the writer to write (or spool) what is queued;
/// past it, what is left is logged as not written and the process goes on stopping (within
/// Kubernetes' 30 s between SIGTERM and SIGKILL, after the reconciles' grace).
pub const CLOSE_DEADLINE: Duration = Duration::from_secs(10);
/// The numbering file kept in the spool directory ([`LiveRecorder::with_numbering`]).
pub const NUMBERING: &str = "controller-numbering.json";

/// What the writer has done, for the controller's metrics.
#[derive(Debug, Clone, Default)]
pub struct WriterStats {
    /// Records (decisions, windows, stage changes) written or spooled.
    pub written: Counter,
    /// Records refused: the spool full, the queue full, or a write the store rejected.
    pub refused: Counter,
    /// Operations waiting in the spool for the store.
    pub spooled: Gauge,
    /// Spooled operations set aside as never applicable (`rejected.jsonl` in the spool).
    pub set_aside: Gauge,
}

impl WriterStats {
    /// As OpenMetrics text (ending `# EOF`).
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        registry.register(
            "aware_controller_store_records",
            "Lifecycle records (decisions, windows, stage changes) written to --store or spooled for it",
            self.written.clone(),
        );
        registry.register(
            "aware_controller_store_records_refused",
            "Lifecycle records not kept: the spool full, the writer too far behind, or a record the store rejected",
            self.refused.clone(),
        );
        registry.register(
            "aware_controller_store_spooled_operations",
            "Store operations waiting in the spool for the store to return",
            self.spooled.clone(),
        );
        registry.register(
            "aware_controller_store_set_aside_operations",
            "Spooled store operations the store refused when flushed (or unreadable in the journal), kept in the spool's rejected.jsonl with the reason",
            self.set_aside.clone(),
        );
        let mut out = String::new();
        encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}

/// The thread that writes the lifecycle's records into the store.
pub struct StoreWriter {
    sender: Option<SyncSender<LiveRecords>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Disconnected when the thread ends (its sender is dropped with it).
    ended: Option<Receiver<()>>,
    /// Passes' records handed over and not yet written.
    queued: Arc<AtomicUsize>,
    pub stats: WriterStats,
    /// Where it writes, for messages.
    pub describe: String,
    /// The fallback's transitions the store holds, for the agent to learn offline from again,
    /// as the writer reads them after opening it.
    pub demonstrations: Demonstrations,
}

/// Where the fallback's transitions read from the store stand ([`Demonstrations::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemonstrationsStatus {
    /// The writer is still reading them.
    Reading,
    /// Read: this many wait to be taken up.
    Read(usize),
    /// Not read, for this reason, not yet reported by whoever takes them up.
    Failed(String),
    /// Taken up (or the failure reported): nothing more comes.
    TakenUp,
}

#[derive(Default)]
enum Slot {
    #[default]
    Reading,
    Read(Result<Vec<Experience>, StoreError>),
    TakenUp,
}

/// The fallback's transitions the store held when the writer opened it, for the agent to learn
/// offline from again ([`aware_lifecycle::record::recent_demonstrations`]), or why none could
/// be read: filled once by the writer's thread after the store is open, taken once by the
/// decider (its passes ask each time until they are there). Clones share the one slot.
#[derive(Clone, Default)]
pub struct Demonstrations(Arc<(Mutex<Slot>, Condvar)>);

impl std::fmt::Debug for Demonstrations {
    /// Where they stand, not the transitions (up to 100,000 of them).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Demonstrations").field(&self.status()).finish()
    }
}

impl Demonstrations {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.0.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands over what was read (the writer's thread, once).
    fn fill(&self, read: Result<Vec<Experience>, StoreError>) {
        let mut slot = self.slot();
        if matches!(*slot, Slot::Reading) {
            *slot = Slot::Read(read);
        }
        self.0.1.notify_all();
    }

    /// The transitions read, or why none could be, the first time it is asked after the
    /// writer has read them; `None` while it still reads and ever after.
    pub fn take(&self) -> Option<Result<Vec<Experience>, StoreError>> {
        let mut slot = self.slot();
        match std::mem::replace(&mut *slot, Slot::TakenUp) {
            Slot::Read(read) => {
                self.0.1.notify_all();
                Some(read)
            }
            before => {
                *slot = before;
                None
            }
        }
    }

    /// Where they stand: being read, read and waiting, or taken up.
    pub fn status(&self) -> DemonstrationsStatus {
        match &*self.slot() {
            Slot::Reading => DemonstrationsStatus::Reading,
            Slot::Read(Ok(transitions)) => DemonstrationsStatus::Read(transitions.len()),
            Slot::Read(Err(e)) => DemonstrationsStatus::Failed(e.to_string()),
            Slot::TakenUp => DemonstrationsStatus::TakenUp,
        }
    }

    /// Waits at most `timeout` for the writer to have read them (or to have failed to), and
    /// says where they stand then: [`DemonstrationsStatus::Reading`] where the time ran out.
    pub fn wait(&self, timeout: Duration) -> DemonstrationsStatus {
        let slot = self.slot();
        let (slot, _) = self
            .0
            .1
            .wait_timeout_while(slot, timeout, |s| matches!(s, Slot::Reading))
            .unwrap_or_else(PoisonError::into_inner);
        drop(slot);
        self.status()
    }
}

/// Fills its [`Demonstrations`] with an error when dropped before they were read (a fill after
/// one changes nothing).
struct Unread(Demonstrations);

impl Drop for Unread {
    fn drop(&mut self) {
        self.0.fill(Err(StoreError::Backend(
            "the store's writer thread stopped before it read the fallback's transitions".into(),
        )));
    }
}

fn count(records: &LiveRecords) -> u64 {
    (records.decisions.len() + records.windows.len() + records.changes.len()) as u64
}

impl StoreWriter {
    /// Opens the store with `open` on the writer's own thread and returns once it is open (its
    /// error, if any, is returned here). The thread then reads the fallback's recent transitions
    /// (at most `demonstrations`, none where 0) into [`StoreWriter::demonstrations`], which can
    /// take long on a large store, and only then writes what [`StoreWriter::send`] is given
    /// (queued meanwhile), numbered by `recorder` (kept in `numbering`, beside the spool, across
    /// restarts while the store is away).
    pub fn start(
        describe: impl Into<String>,
        open: impl FnOnce() -> Result<Spooled, StoreError> + Send + 'static,
        recorder: LiveRecorder,
        numbering: Option<PathBuf>,
        demonstrations: usize,
    ) -> Result<Self, StoreError> {
        let describe = describe.into();
        let (sender, receiver) = sync_channel::<LiveRecords>(QUEUED_BATCHES);
        let (opened_tx, opened_rx) = sync_channel::<Result<(), StoreError>>(1);
        let stats = WriterStats::default();
        let thread_stats = stats.clone();
        let name = describe.clone();
        let queued = Arc::new(AtomicUsize::new(0));
        let thread_queued = queued.clone();
        let read = Demonstrations::default();
        let thread_read = read.clone();
        let (ended_tx, ended) = sync_channel::<()>(0);
        let thread = std::thread::Builder::new()
            .name("aware-store".into())
            .spawn(move || {
                let _ended = ended_tx;
                // Should the thread end before it has read them (a panic in the read), the
                // decider is told so instead of waiting for them for good.
                let _unread = Unread(thread_read.clone());
                let store = match open() {
                    Ok(store) => {
                        let _ = opened_tx.send(Ok(()));
                        store
                    }
                    Err(e) => {
                        let _ = opened_tx.send(Err(e));
                        return;
                    }
                };
                thread_read.fill(if demonstrations == 0 {
                    Ok(Vec::new())
                } else {
                    aware_lifecycle::record::recent_demonstrations(
                        &store,
                        recorder.agent(),
                        recorder.fallback(),
                        demonstrations,
                    )
                });
                let recorder = match numbering {
                    Some(path) => recorder.with_numbering(path),
                    None => recorder,
                };
                write_loop(store, recorder, receiver, &thread_stats, &thread_queued, &name);
            })
            .map_err(|e| StoreError::Backend(format!("cannot start the store's writer thread: {e}")))?;
        match opened_rx.recv() {
            Ok(Ok(())) => Ok(Self {
                sender: Some(sender),
                thread: Some(thread),
                ended: Some(ended),
                queued,
                stats,
                describe,
                demonstrations: read,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(StoreError::Backend("the store's writer thread stopped while opening it".into()))
            }
        }
    }

    /// Hands one pass's records to the writer; refused (counted and logged) where it is
    /// [`QUEUED_BATCHES`] passes behind.
    pub fn send(&self, records: LiveRecords) {
        if records.is_empty() {
            return;
        }
        let Some(sender) = &self.sender else { return };
        let n = count(&records);
        self.queued.fetch_add(1, Ordering::SeqCst);
        match sender.try_send(records) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                self.stats.refused.inc_by(n);
                tracing::warn!(
                    store = %self.describe,
                    "{n} records refused: the store's writer is {QUEUED_BATCHES} passes behind"
                );
            }
            Err(TrySendError::Disconnected(_)) => {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                self.stats.refused.inc_by(n);
                tracing::warn!(store = %self.describe, "{n} records refused: the store's writer has stopped");
            }
        }
    }

    /// Writes what is queued, tries the spool once more, and stops the thread: waits at most
    /// [`CLOSE_DEADLINE`] (a store that does not answer can hold each write for its connect
    /// timeout), then logs what is still queued as not written and leaves the thread.
    pub fn close(&mut self) {
        self.sender = None;
        let Some(thread) = self.thread.take() else { return };
        let ended = self.ended.take().map(|e| e.recv_timeout(CLOSE_DEADLINE));
        if matches!(ended, Some(Err(RecvTimeoutError::Timeout))) {
            tracing::warn!(
                store = %self.describe,
                "stopping: {} passes' records still queued for the store are not written ({CLOSE_DEADLINE:?} passed)",
                self.queued.load(Ordering::SeqCst)
            );
            return;
        }
        let _ = thread.join();
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        self.close();
    }
}

fn write_loop(
    mut store: Spooled,
    mut recorder: LiveRecorder,
    receiver: Receiver<LiveRecords>,
    stats: &WriterStats,
    queued: &AtomicUsize,
    describe: &str,
) {
    let mut refused_before = 0;
    loop {
        match receiver.recv_timeout(FLUSH_EVERY) {
            Ok(records) => {
                let n = count(&records);
                let written = recorder.write(&mut store, records);
                for app in recorder.guessed.drain(..) {
                    tracing::warn!(
                        store = %describe,
                        "{app}: numbered from 0, neither the store nor the spool's numbering file saying where its records go on from; once the store answers, they may collide with what it holds (keep --spool on a volume)"
                    );
                }
                match written {
                    Ok(()) => {
                        let refused = recorder.refused - refused_before;
                        if refused > 0 {
                            tracing::warn!(
                                store = %describe,
                                "{refused} records refused: {}",
                                recorder.refused_reason.as_deref().unwrap_or("the spool is full")
                            );
                        }
                        refused_before = recorder.refused;
                        stats.refused.inc_by(refused);
                        stats.written.inc_by(n.saturating_sub(refused));
                    }
                    Err(e) => {
                        // What was written before the error stays written; the rest of the
                        // pass is counted refused.
                        stats.refused.inc_by(n);
                        refused_before = recorder.refused;
                        tracing::warn!(store = %describe, "records not written: {e}");
                    }
                }
                queued.fetch_sub(1, Ordering::SeqCst);
            }
            Err(RecvTimeoutError::Timeout) => {
                if store.pending() > 0 {
                    let _ = store.flush();
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                recorder.save_numbering();
                if store.pending() > 0 {
                    let _ = store.flush();
                }
                stats.spooled.set(store.pending() as i64);
                if store.pending() > 0 {
                    tracing::warn!(
                        store = %describe,
                        "{} operations stay spooled in {} for the next run to flush",
                        store.pending(),
                        store.dir().display()
                    );
                }
                return;
            }
        }
        stats.spooled.set(store.pending() as i64);
        stats.set_aside.set(store.set_aside() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing to take while the writer reads; what it read is taken once, a failure as
    /// much as transitions; a second fill (there is none) does not hand anything over again.
    #[test]
    fn demonstrations_are_taken_once_after_they_are_read() {
        let read = Demonstrations::default();
        let shared = read.clone();
        assert_eq!(read.status(), DemonstrationsStatus::Reading);
        assert!(read.take().is_none());
        assert_eq!(read.wait(Duration::ZERO), DemonstrationsStatus::Reading);

        shared.fill(Ok(Vec::new()));
        assert_eq!(read.status(), DemonstrationsStatus::Read(0));
        assert!(matches!(read.take(), Some(Ok(t)) if t.is_empty()));
        assert_eq!(shared.status(), DemonstrationsStatus::TakenUp);
        assert!(shared.take().is_none());
        shared.fill(Ok(Vec::new()));
        assert!(read.take().is_none(), "taken up once");

        let failed = Demonstrations::default();
        failed.fill(Err(StoreError::Unavailable("away".into())));
        assert!(matches!(failed.status(), DemonstrationsStatus::Failed(why) if why.contains("away")));
        assert!(matches!(failed.take(), Some(Err(StoreError::Unavailable(_)))));
        assert_eq!(failed.wait(Duration::ZERO), DemonstrationsStatus::TakenUp);
    }
}
