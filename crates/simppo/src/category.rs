//! The three application categories SIMPPO keeps a base model for, read off the segment mix.

use aware_sim::AppSpec;
use serde::Serialize;

/// What dominates an application's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// CPU work dominates (floating-point ops, compression, JSON).
    Cpu,
    /// Working set per request in flight is large (images, matrix multiply).
    Memory,
    /// I/O waits dominate (object store, files, key-value, sleep).
    Io,
}

/// Working set per request in flight above which a chain counts as memory-intensive (the
/// image and matrix segments hold 12–30 MiB, the others at most 8).
pub const MEMORY_INTENSIVE_BYTES: f64 = 10.0 * 1024.0 * 1024.0;

impl Category {
    /// Every category, in a fixed order.
    pub const ALL: [Category; 3] = [Category::Cpu, Category::Memory, Category::Io];

    /// The category of a chain with `cpu_s` CPU seconds, `io_s` seconds of I/O wait and
    /// `mem_per_request_bytes` of working set per request in flight: I/O-intensive when waiting
    /// outweighs computing, else memory-intensive above [`MEMORY_INTENSIVE_BYTES`], else CPU.
    pub fn of_cost(cpu_s: f64, io_s: f64, mem_per_request_bytes: f64) -> Category {
        if io_s > cpu_s {
            Category::Io
        } else if mem_per_request_bytes >= MEMORY_INTENSIVE_BYTES {
            Category::Memory
        } else {
            Category::Cpu
        }
    }

    /// The category of an application, from its segments' summed request cost.
    pub fn of(app: &AppSpec) -> Category {
        let c = app.cost();
        Category::of_cost(c.cpu_s, c.io_s, c.mem_per_request_bytes)
    }

    /// Index in [`Category::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_follow_the_dominant_cost() {
        const MIB: f64 = 1024.0 * 1024.0;
        assert_eq!(Category::of_cost(0.12, 0.0, 12.0 * MIB), Category::Memory, "mat-mul");
        assert_eq!(Category::of_cost(0.03, 0.0, 2.0 * MIB), Category::Cpu, "float-ops");
        assert_eq!(Category::of_cost(0.02, 0.12, 2.0 * MIB), Category::Io, "object-stream");
        assert_eq!(Category::of_cost(0.08, 0.005, 24.0 * MIB), Category::Memory, "image-compress");
    }
}
