//! Progress bars on a terminal, nothing when stderr is not one (CI logs, pipes).

use indicatif::{ProgressBar, ProgressStyle};

/// The lab's progress sink drawn as one indicatif bar; each `start` begins a new phase. With
/// [`Bar::logging`], lines to keep ([`aware_lab::progress::Progress::log`]) go to stderr too:
/// above the bar on a terminal, as plain lines otherwise (a log file, a pipe).
pub struct Bar(ProgressBar, bool);

impl Bar {
    pub fn new() -> Self {
        let bar = ProgressBar::hidden();
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        Bar(bar, false)
    }

    /// A bar that also writes the lines a run logs (`aware run`'s stage changes).
    pub fn logging() -> Self {
        let mut bar = Self::new();
        bar.1 = true;
        bar
    }
}

impl aware_lab::progress::Progress for Bar {
    fn start(&self, len: u64, label: &str) {
        self.0.reset();
        self.0.set_length(len);
        self.0.set_position(0);
        self.0.set_message(label.to_string());
    }

    fn inc(&self, units: u64) {
        self.0.inc(units);
    }

    fn message(&self, message: &str) {
        self.0.set_message(message.to_string());
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }

    fn log(&self, line: &str) {
        if !self.1 {
            return;
        }
        if self.0.is_hidden() {
            eprintln!("{line}");
        } else {
            self.0.println(line);
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
