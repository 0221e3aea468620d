//! The 16 serverless segment types applications are chained from.
//!
//! Magnitudes are single-vCPU figures of the order reported for the corresponding FunctionBench
//! (Kim & Lee, SoCC'19) and SeBS (Copik et al., Middleware'21) functions at their default
//! payloads, rounded; I/O waits are typical same-zone round trips (key-value store ~1–5 ms,
//! object store ~20–100 ms). They are representative, not measurements of any one machine: what
//! matters for policy ranking is their spread (three orders of magnitude of CPU work, CPU-bound
//! against I/O-bound, memory-light against memory-heavy), which they preserve.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SegmentKind {
    FloatOps,
    MatMul,
    ImageCompress,
    ImageResize,
    ImageRotate,
    JsonToYaml,
    Compress,
    Decompress,
    KvRead,
    KvWrite,
    FileRead,
    FileWrite,
    ObjectRead,
    ObjectWrite,
    ObjectStream,
    Sleep,
}

/// Cost of one request through a segment at payload 1; `*_exp` say how each cost grows with the
/// payload knob (cost × payload^exp), e.g. matrix multiply CPU grows as n³ for an n×n payload
/// whose side grows as payload^0.5.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SegmentParams {
    /// CPU time on one unthrottled core, milliseconds.
    pub cpu_ms: f64,
    pub cpu_exp: f64,
    /// Wall time waiting on I/O, unaffected by the CPU limit, milliseconds.
    pub io_ms: f64,
    pub io_exp: f64,
    /// Resident memory of the runtime and libraries, MiB.
    pub mem_base_mib: f64,
    /// Extra working set per request in flight, MiB.
    pub mem_per_request_mib: f64,
    pub mem_exp: f64,
    /// Disk bytes read or written per request, KiB (scales linearly with payload).
    pub disk_kib: f64,
    /// Network bytes per request, KiB (scales linearly with payload).
    pub net_kib: f64,
}

/// One row of the parameter table; positional so the table below reads as a table.
#[allow(clippy::too_many_arguments)]
const fn p(
    cpu_ms: f64,
    cpu_exp: f64,
    io_ms: f64,
    io_exp: f64,
    mem_base_mib: f64,
    mem_per_request_mib: f64,
    mem_exp: f64,
    disk_kib: f64,
    net_kib: f64,
) -> SegmentParams {
    SegmentParams { cpu_ms, cpu_exp, io_ms, io_exp, mem_base_mib, mem_per_request_mib, mem_exp, disk_kib, net_kib }
}

impl SegmentKind {
    pub const ALL: [SegmentKind; 16] = [
        SegmentKind::FloatOps,
        SegmentKind::MatMul,
        SegmentKind::ImageCompress,
        SegmentKind::ImageResize,
        SegmentKind::ImageRotate,
        SegmentKind::JsonToYaml,
        SegmentKind::Compress,
        SegmentKind::Decompress,
        SegmentKind::KvRead,
        SegmentKind::KvWrite,
        SegmentKind::FileRead,
        SegmentKind::FileWrite,
        SegmentKind::ObjectRead,
        SegmentKind::ObjectWrite,
        SegmentKind::ObjectStream,
        SegmentKind::Sleep,
    ];

    pub fn params(self) -> SegmentParams {
        use SegmentKind::*;
        match self {
            //                 cpu  exp  io   exp  base  per  exp  disk   net
            FloatOps => p(30.0, 1.0, 0.0, 0.0, 40.0, 2.0, 0.0, 0.0, 1.0),
            MatMul => p(120.0, 1.5, 0.0, 0.0, 60.0, 12.0, 1.0, 0.0, 2.0),
            ImageCompress => p(80.0, 1.0, 5.0, 1.0, 80.0, 24.0, 1.0, 0.0, 256.0),
            ImageResize => p(60.0, 1.0, 5.0, 1.0, 80.0, 30.0, 1.0, 0.0, 256.0),
            ImageRotate => p(40.0, 1.0, 5.0, 1.0, 80.0, 24.0, 1.0, 0.0, 256.0),
            JsonToYaml => p(15.0, 1.0, 0.0, 0.0, 50.0, 4.0, 1.0, 0.0, 64.0),
            Compress => p(90.0, 1.0, 10.0, 1.0, 40.0, 8.0, 1.0, 1024.0, 0.0),
            Decompress => p(35.0, 1.0, 10.0, 1.0, 40.0, 8.0, 1.0, 1024.0, 0.0),
            KvRead => p(2.0, 0.2, 3.0, 0.3, 30.0, 0.5, 1.0, 0.0, 4.0),
            KvWrite => p(3.0, 0.2, 5.0, 0.3, 30.0, 0.5, 1.0, 0.0, 4.0),
            FileRead => p(5.0, 0.5, 15.0, 1.0, 30.0, 4.0, 1.0, 1024.0, 0.0),
            FileWrite => p(8.0, 0.5, 25.0, 1.0, 30.0, 4.0, 1.0, 1024.0, 0.0),
            ObjectRead => p(10.0, 0.5, 40.0, 1.0, 45.0, 8.0, 1.0, 0.0, 1024.0),
            ObjectWrite => p(12.0, 0.5, 60.0, 1.0, 45.0, 8.0, 1.0, 0.0, 1024.0),
            ObjectStream => p(20.0, 1.0, 120.0, 1.0, 50.0, 2.0, 0.0, 0.0, 4096.0),
            Sleep => p(0.5, 0.0, 100.0, 1.0, 20.0, 0.2, 0.0, 0.0, 0.0),
        }
    }

    /// Whether a payload change of this segment mostly changes CPU work (the AWARE scenarios
    /// distinguish CPU-, I/O- and memory-dominated payload shifts).
    pub fn is_cpu_bound(self) -> bool {
        let p = self.params();
        p.cpu_ms >= p.io_ms
    }

    pub fn is_memory_heavy(self) -> bool {
        self.params().mem_per_request_mib >= 8.0
    }

    pub fn name(self) -> &'static str {
        use SegmentKind::*;
        match self {
            FloatOps => "float-ops",
            MatMul => "mat-mul",
            ImageCompress => "image-compress",
            ImageResize => "image-resize",
            ImageRotate => "image-rotate",
            JsonToYaml => "json-to-yaml",
            Compress => "compress",
            Decompress => "decompress",
            KvRead => "kv-read",
            KvWrite => "kv-write",
            FileRead => "file-read",
            FileWrite => "file-write",
            ObjectRead => "object-read",
            ObjectWrite => "object-write",
            ObjectStream => "object-stream",
            Sleep => "sleep",
        }
    }
}

/// One link of an application's chain: a segment type at a payload size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub kind: SegmentKind,
    /// Payload relative to the segment's default (1.0).
    pub payload: f64,
}

/// Coefficient of variation of per-request CPU work and I/O wait: requests of one application
/// differ (payload contents, cache hits) but not wildly. Both modes draw request sizes with it.
pub const REQUEST_SIZE_CV: f64 = 0.5;

/// What one request of an application costs on average, the chain summed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RequestCost {
    /// CPU work, core-seconds; at most one core works on one request at a time.
    pub cpu_s: f64,
    /// I/O wait, seconds, independent of CPU allocation.
    pub io_s: f64,
    pub mem_base_bytes: f64,
    /// Working set per request in flight (time-weighted over the chain), bytes.
    pub mem_per_request_bytes: f64,
    pub disk_bytes: f64,
    pub net_bytes: f64,
}

const MIB: f64 = 1024.0 * 1024.0;

impl RequestCost {
    /// The chain's cost with each segment's payload multiplied by `payload_scale(kind)`.
    pub fn of_chain(segments: &[Segment], payload_scale: impl Fn(SegmentKind) -> f64) -> RequestCost {
        let mut c = RequestCost {
            cpu_s: 0.0,
            io_s: 0.0,
            mem_base_bytes: 0.0,
            mem_per_request_bytes: 0.0,
            disk_bytes: 0.0,
            net_bytes: 0.0,
        };
        let mut weighted_mem = 0.0;
        for s in segments {
            let q = s.kind.params();
            let payload = s.payload * payload_scale(s.kind);
            let cpu = q.cpu_ms / 1000.0 * payload.powf(q.cpu_exp);
            let io = q.io_ms / 1000.0 * payload.powf(q.io_exp);
            c.cpu_s += cpu;
            c.io_s += io;
            // Libraries of every segment are loaded once per container.
            c.mem_base_bytes += q.mem_base_mib * MIB;
            weighted_mem += (cpu + io) * q.mem_per_request_mib * MIB * payload.powf(q.mem_exp);
            c.disk_bytes += q.disk_kib * 1024.0 * payload;
            c.net_bytes += q.net_kib * 1024.0 * payload;
        }
        let time = c.cpu_s + c.io_s;
        c.mem_per_request_bytes = if time > 0.0 { weighted_mem / time } else { 0.0 };
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_positive_work_and_memory() {
        for k in SegmentKind::ALL {
            let p = k.params();
            assert!(p.cpu_ms > 0.0 && p.mem_base_mib > 0.0 && p.cpu_ms + p.io_ms > 0.0, "{k:?}");
        }
    }

    #[test]
    fn payload_scales_cost_by_its_exponent() {
        let one = RequestCost::of_chain(&[Segment { kind: SegmentKind::MatMul, payload: 1.0 }], |_| 1.0);
        let four = RequestCost::of_chain(&[Segment { kind: SegmentKind::MatMul, payload: 4.0 }], |_| 1.0);
        assert!((four.cpu_s / one.cpu_s - 8.0).abs() < 1e-9);
        let scaled = RequestCost::of_chain(&[Segment { kind: SegmentKind::MatMul, payload: 1.0 }], |_| 4.0);
        assert_eq!(scaled, four);
    }
}
