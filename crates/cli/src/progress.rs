//! Progress bars on a terminal, none when stderr is not one (CI logs, pipes); a run's log lines
//! (its stage changes) go to stderr either way.

use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The lab's progress sink drawn as one indicatif bar; each `start` begins a new phase. With
/// [`Bar::logging`], lines to keep ([`aware_lab::progress::Progress::log`]) go to stderr too:
/// above the bar on a terminal, as plain lines otherwise (a log file, a pipe); and a table
/// ([`aware_lab::progress::Progress::table`]) is redrawn under the bar on a terminal.
pub struct Bar {
    multi: MultiProgress,
    bar: ProgressBar,
    log: bool,
    /// The table's lines, one text-only bar each, below the progress bar.
    rows: Mutex<Vec<ProgressBar>>,
    /// A line to print once the work begins ([`Bar::with_notice`]).
    notice: Mutex<Option<String>>,
}

impl Bar {
    pub fn new() -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let bar = multi.add(ProgressBar::new(0));
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        Bar { multi, bar, log: false, rows: Mutex::new(Vec::new()), notice: Mutex::new(None) }
    }

    /// Prints `line` to stderr when the work begins (its first phase, log line or finish), not
    /// before: a run refused on its input then says only why (one line), not also what it
    /// would have served.
    pub fn with_notice(self, line: String) -> Self {
        *self.notice.lock().unwrap_or_else(|e| e.into_inner()) = Some(line);
        self
    }

    fn print(&self, line: &str) {
        if self.multi.is_hidden() {
            eprintln!("{line}");
        } else {
            let _ = self.multi.println(line);
        }
    }

    fn announce(&self) {
        if let Some(line) = self.notice.lock().unwrap_or_else(|e| e.into_inner()).take() {
            self.print(&line);
        }
    }

    /// A bar that also writes the lines a run logs (`aware run`'s stage changes) and draws its
    /// table.
    pub fn logging() -> Self {
        let mut bar = Self::new();
        bar.log = true;
        bar
    }

    fn clear_rows(&self) {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        for row in rows.drain(..) {
            row.finish_and_clear();
            self.multi.remove(&row);
        }
    }
}

impl aware_lab::progress::Progress for Bar {
    fn start(&self, len: u64, label: &str) {
        self.announce();
        // A new phase: the last one's table goes with it.
        self.clear_rows();
        self.bar.reset();
        self.bar.set_length(len);
        self.bar.set_position(0);
        self.bar.set_message(label.to_string());
    }

    fn inc(&self, units: u64) {
        self.bar.inc(units);
    }

    fn message(&self, message: &str) {
        self.bar.set_message(message.to_string());
    }

    fn finish(&self) {
        self.announce();
        self.clear_rows();
        self.bar.finish_and_clear();
    }

    fn log(&self, line: &str) {
        self.announce();
        if self.log {
            self.print(line);
        }
    }

    fn table(&self, lines: &[String]) {
        if !self.log || self.multi.is_hidden() {
            return;
        }
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        while rows.len() > lines.len() {
            if let Some(row) = rows.pop() {
                row.finish_and_clear();
                self.multi.remove(&row);
            }
        }
        while rows.len() < lines.len() {
            let row = self.multi.add(ProgressBar::new(0));
            row.set_style(ProgressStyle::with_template("{msg}").expect("valid template"));
            rows.push(row);
        }
        for (row, line) in rows.iter().zip(lines) {
            row.set_message(line.clone());
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.clear_rows();
        self.bar.finish_and_clear();
    }
}
