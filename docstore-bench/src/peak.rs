//! Peak memory of this process, from Linux's `/proc/self`: writing `5` to `clear_refs`
//! resets the high-water mark `VmHWM` to the current resident set, so the mark read after a
//! workload is the most it held while the workload ran. Elsewhere nothing is measured.

use std::fs;

/// A workload's memory window, opened before it runs.
#[derive(Clone, Copy, Debug)]
pub struct PeakWindow {
    start_kib: Option<u64>,
}

impl PeakWindow {
    /// Resets the high-water mark and remembers the resident set now.
    pub fn open() -> Self {
        let reset = fs::write("/proc/self/clear_refs", "5").is_ok();
        PeakWindow {
            start_kib: if reset { status_kib("VmRSS") } else { None },
        }
    }

    /// How far the resident set rose above its level at [`open`](Self::open), at its
    /// highest, in KiB; `None` where it cannot be measured.
    pub fn growth_kib(&self) -> Option<u64> {
        let start = self.start_kib?;
        status_kib("VmHWM").map(|peak| peak.saturating_sub(start))
    }
}

/// A `kB` field of `/proc/self/status`.
fn status_kib(field: &str) -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// The resident set now, in KiB, where it can be read.
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_allocation_shows() {
        let window = PeakWindow::open();
        let Some(_) = window.start_kib else {
            return; // not Linux, or clear_refs not writable
        };
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        drop(block);
        assert!(window.growth_kib().unwrap() >= 60 << 10);
    }
}
