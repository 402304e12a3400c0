//! The report: one section per backend (and one for the evaluator), printed as a table and
//! written as JSON.

use crate::BenchResult;
use crate::measure::Figures;
use crate::workloads::Comparison;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// Everything one run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// When the run started, unix seconds.
    pub started_unix: u64,
    /// `/proc/loadavg` when the run started.
    pub load_average: Option<String>,
    /// Cores available to the process.
    pub cores: usize,
    /// The command line.
    pub command: String,
    /// One section per backend, then the evaluator.
    pub sections: Vec<Section>,
    /// What a reader must know (sizes, skipped backends, checks).
    pub notes: Vec<String>,
}

/// One backend's comparisons.
#[derive(Clone, Debug, Serialize)]
pub struct Section {
    /// `memory`, `sqlite`, `dynamodb` or `evaluator`.
    pub backend: String,
    /// What the docstore side and the baseline are, and the sizes.
    pub description: String,
    /// The workloads.
    pub rows: Vec<Comparison>,
}

fn rate(x: f64) -> String {
    if x >= 100_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn micros(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.0}ms", x / 1000.0)
    } else if x >= 1_000.0 {
        format!("{:.1}ms", x / 1000.0)
    } else if x >= 10.0 {
        format!("{x:.0}µs")
    } else {
        format!("{x:.2}µs")
    }
}

/// `0.77` or, after several rounds, `0.77 (0.74–0.80)`.
fn ratio(c: &Comparison, bold_below: Option<f64>) -> String {
    let median = match bold_below {
        Some(limit) if c.ratio < limit => format!("**{:.2}**", c.ratio),
        _ => format!("{:.2}", c.ratio),
    };
    with_range(median, &c.ratio_runs)
}

/// `shown`, followed by the range of `runs` when there are several.
fn with_range(shown: String, runs: &[f64]) -> String {
    if runs.len() < 2 {
        return shown;
    }
    let min = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{shown} ({min:.2}–{max:.2})")
}

fn mem(f: &Figures) -> String {
    f.peak_mem_kib
        .map_or("-".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0))
}

fn requests(c: &Comparison) -> String {
    match (
        c.docstore.total_requests_per_op(),
        c.baseline.total_requests_per_op(),
    ) {
        (Some(d), Some(b)) => {
            let min = c
                .min_requests_per_op
                .map_or("-".to_owned(), |m| format!("{m:.3}"));
            format!("{d:.3} / {b:.3} / {min}")
        }
        _ => String::new(),
    }
}

/// `GetItem 1.00 × 270µs + PutItem 1.00 × 300µs` for one side: requests per op and the
/// waiting per request.
fn breakdown(f: &Figures) -> String {
    let (Some(counts), Some(waits)) = (&f.requests_per_op, &f.request_wait_us_per_op) else {
        return String::new();
    };
    counts
        .iter()
        .map(|(op, n)| {
            let wait = waits.get(op).copied().unwrap_or(0.0) / n.max(1e-9);
            format!("{op} {n:.2} × {}", micros(wait))
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Lines breaking each DynamoDB workload's requests down by operation.
fn request_lines(section: &Section) -> Vec<String> {
    section
        .rows
        .iter()
        .filter(|c| c.docstore.requests_per_op.is_some())
        .map(|c| {
            format!(
                "{}: docstore {}; baseline {}",
                c.workload,
                breakdown(&c.docstore),
                breakdown(&c.baseline)
            )
        })
        .collect()
}

/// `create 0.93 (0.90–0.97), get 0.81`: each typed row's ops/s over the raw docstore row's,
/// in the round the typed row reports (with every round's range); empty without typed rows.
fn typed_line(section: &Section) -> String {
    section
        .rows
        .iter()
        .filter_map(|c| {
            let name = c.workload.strip_suffix(", typed")?;
            let shown = format!("{name} {:.2}", c.typed_vs_raw?);
            Some(with_range(shown, &c.typed_vs_raw_runs))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Report {
    /// The report as the text table the binary prints.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for section in &self.sections {
            let _ = writeln!(out, "\n== {}: {}", section.backend, section.description);
            let _ = writeln!(
                out,
                "{:<44} {:>9} {:>9} {:>16} {:>17} {:>17} {:>13} {:>23}",
                "workload (per op)",
                "docstore/s",
                "base/s",
                "ratio",
                "p50 doc / base",
                "p99 doc / base",
                "peak MiB d/b",
                "requests d / b / min"
            );
            for c in &section.rows {
                let mut name = format!("{} ({})", c.workload, c.unit);
                if c.same_answer == Some(false) {
                    name.push_str(" DIFFERENT ANSWERS");
                }
                let _ = writeln!(
                    out,
                    "{:<44} {:>9} {:>9} {:>16} {:>17} {:>17} {:>13} {:>23}",
                    name,
                    rate(c.docstore.ops_per_sec),
                    rate(c.baseline.ops_per_sec),
                    ratio(c, None),
                    format!(
                        "{} / {}",
                        micros(c.docstore.p50_us),
                        micros(c.baseline.p50_us)
                    ),
                    format!(
                        "{} / {}",
                        micros(c.docstore.p99_us),
                        micros(c.baseline.p99_us)
                    ),
                    format!("{} / {}", mem(&c.docstore), mem(&c.baseline)),
                    requests(c),
                );
            }
            let typed = typed_line(section);
            if !typed.is_empty() {
                let _ = writeln!(
                    out,
                    "typed ops/s ÷ raw docstore ops/s (same round): {typed}"
                );
            }
            let lines = request_lines(section);
            if !lines.is_empty() {
                out.push_str("requests per op × time waiting for each answer:\n");
                for line in lines {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
        if !self.notes.is_empty() {
            out.push_str("\nNotes:\n");
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }

    /// The report as Markdown tables (for `docs/benchmarks.md`).
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for section in &self.sections {
            let _ = writeln!(out, "\n**{}**: {}\n", section.backend, section.description);
            let dynamo = section
                .rows
                .iter()
                .any(|c| c.docstore.requests_per_op.is_some());
            out.push_str(
                "| workload (per op) | docstore ops/s | baseline ops/s | ratio | p50 docstore / baseline | p99 docstore / baseline | peak MiB d / b |",
            );
            out.push_str(if dynamo {
                " requests/op d / b / min |\n|---|--:|--:|--:|--:|--:|--:|--:|\n"
            } else {
                "\n|---|--:|--:|--:|--:|--:|--:|\n"
            });
            for c in &section.rows {
                let mut name = format!("{} ({})", c.workload, c.unit);
                if c.same_answer == Some(false) {
                    name.push_str(" DIFFERENT ANSWERS");
                }
                let _ = write!(
                    out,
                    "| {} | {} | {} | {} | {} / {} | {} / {} | {} / {} |",
                    name,
                    rate(c.docstore.ops_per_sec),
                    rate(c.baseline.ops_per_sec),
                    ratio(c, Some(0.8)),
                    micros(c.docstore.p50_us),
                    micros(c.baseline.p50_us),
                    micros(c.docstore.p99_us),
                    micros(c.baseline.p99_us),
                    mem(&c.docstore),
                    mem(&c.baseline),
                );
                if dynamo {
                    let _ = write!(out, " {} |", requests(c));
                }
                out.push('\n');
            }
            let typed = typed_line(section);
            if !typed.is_empty() {
                let _ = writeln!(
                    out,
                    "\nTyped `Collection<T>` ops/s ÷ raw `Store` ops/s (same round): {typed}"
                );
            }
            let lines = request_lines(section);
            if !lines.is_empty() {
                out.push_str("\nRequests per operation × time waiting for each answer:\n\n");
                for line in lines {
                    let _ = writeln!(out, "- {line}");
                }
            }
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }

    /// Writes the report as pretty JSON to `path`.
    pub fn write_json(&self, path: &Path) -> BenchResult<()> {
        std::fs::write(path, serde_json::to_vec_pretty(self)?)?;
        Ok(())
    }
}
