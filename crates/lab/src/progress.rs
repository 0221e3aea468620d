//! How long-running lab work reports progress without knowing where it is shown: the CLI draws
//! a terminal bar, tests and services pass [`Silent`].

/// A progress sink. Calls are cheap and may come from the hot loop (once per interval).
pub trait Progress: Sync {
    /// A new phase of `len` units, labelled for the user.
    fn start(&self, len: u64, label: &str);
    fn inc(&self, units: u64);
    /// A short status line (the current policy, the last episode's reward).
    fn message(&self, message: &str);
    fn finish(&self);
    /// A line worth keeping (a lifecycle stage change with its reason), where the sink keeps a
    /// log; by default it does not.
    fn log(&self, _line: &str) {}
    /// A table redrawn in place while the phase lasts (a run's apps: stage, reward, …), where
    /// the sink draws one; by default it does not.
    fn table(&self, _lines: &[String]) {}
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _len: u64, _label: &str) {}
    fn inc(&self, _units: u64) {}
    fn message(&self, _message: &str) {}
    fn finish(&self) {}
}
