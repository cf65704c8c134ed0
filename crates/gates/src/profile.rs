//! Nsight Compute (`ncu`) profiles of one kernel launch: where ncu is, which metrics to
//! ask for, and the summary read back from its raw-page CSV.
//!
//! Nothing here touches the GPU: `evo profile` runs ncu on a child process that
//! launches the kernel, then hands ncu's output to [`parse_raw_csv`] and
//! [`ProfileSummary::from_row`]. The parsing is tested on the CPU against a CSV recorded
//! on an H100 (tests/fixtures/).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProfileError {
    /// No `ncu` executable in any of the places searched.
    #[error(
        "`evo profile` needs NVIDIA Nsight Compute (`ncu`), which was not found; looked in: {}. \
         Install Nsight Compute (it ships with the CUDA toolkit), or put `ncu` on PATH or set CUDA_HOME",
        looked.join(", ")
    )]
    NcuNotFound { looked: Vec<String> },
    /// ncu ran but profiled nothing; `message` holds its own error and warning lines.
    #[error("ncu profiled no launch of `{kernel}`: {message}")]
    NothingProfiled { kernel: String, message: String },
    /// The CSV is not ncu's raw page (a header, a unit row, then one row per launch).
    #[error("ncu's CSV is unreadable: {0}")]
    Csv(String),
}

/// The kernel `evo profile` profiles (the forward entry of kernels/ABI.md).
pub const KERNEL: &str = crate::device::ENTRY_FWD;

/// The ncu sections whose raw metrics the summary reads: duration and throughputs
/// (SpeedOfLight), occupancy, registers and shared memory (Occupancy, LaunchStats),
/// stall reasons (WarpStateStats), pipe utilisation (ComputeWorkloadAnalysis). Section
/// names are stable across ncu releases, unlike some metric names.
pub const SECTIONS: [&str; 5] = [
    "SpeedOfLight",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "ComputeWorkloadAnalysis",
];

/// Tensor-pipe metrics asked for by name, each only when `ncu --query-metrics` lists its
/// base name on the device (ncu refuses the whole run over one unknown metric). The
/// pipe's active cycles count every class (mma.sync and Hopper's wgmma alike); the
/// instruction counts tell the classes apart: `gmma` counts wgmma only, `hmma` counts
/// mma.sync and (on Hopper, per ncu's description) wgmma too. Some ncu releases also
/// have a gmma-only cycle counter.
pub const TENSOR_METRICS: [&str; 5] = [
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
];

/// Where `ncu` is: the first `ncu` file on `path` (PATH's entries), then under
/// `$CUDA_HOME/bin`, then `/usr/local/cuda/bin`. The error lists every place looked.
pub fn find_ncu(path: Option<&str>, cuda_home: Option<&str>) -> Result<PathBuf, ProfileError> {
    let mut dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    if let Some(home) = cuda_home.filter(|h| !h.is_empty()) {
        dirs.push(Path::new(home).join("bin"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    let mut looked = Vec::new();
    for dir in dirs {
        if dir.as_os_str().is_empty() {
            continue;
        }
        let candidate = dir.join("ncu");
        if candidate.is_file() {
            return Ok(candidate);
        }
        let shown = dir.display().to_string();
        if !looked.contains(&shown) {
            looked.push(shown);
        }
    }
    Err(ProfileError::NcuNotFound { looked })
}

/// The base metric names `ncu --query-metrics` lists (its first column).
pub fn parse_metric_names(query_output: &str) -> BTreeSet<String> {
    query_output
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| {
            w.contains("__")
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        })
        .map(str::to_string)
        .collect()
}

/// The [`TENSOR_METRICS`] whose base name (before the first `.`) is available.
pub fn available_tensor_metrics(available: &BTreeSet<String>) -> Vec<String> {
    TENSOR_METRICS
        .iter()
        .filter(|m| available.contains(m.split('.').next().unwrap_or(m)))
        .map(|m| m.to_string())
        .collect()
}

/// ncu's arguments for profiling launch `skip + 1` of [`KERNEL`] in `child` (program
/// and arguments). Clock control is off so the kernel runs at the clocks FAST sees.
pub fn ncu_args(skip: u32, metrics: &[String], child: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--kernel-name",
        KERNEL,
        "--launch-skip",
        &skip.to_string(),
        "--launch-count",
        "1",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for s in SECTIONS {
        args.push("--section".into());
        args.push(s.into());
    }
    if !metrics.is_empty() {
        args.push("--metrics".into());
        args.push(metrics.join(","));
    }
    args.extend(child.iter().cloned());
    args
}

/// One profiled launch: ncu's identification columns, then every metric with its unit.
#[derive(Debug, Clone, PartialEq)]
pub struct NcuRow {
    /// Every column by header, including the identification ones (`Kernel Name`, `Device`...).
    pub columns: BTreeMap<String, String>,
    /// The unit row's entry per column (`nsecond`, `%`, `byte/block`...; empty for none).
    pub units: BTreeMap<String, String>,
}

impl NcuRow {
    pub fn text(&self, column: &str) -> Option<&str> {
        self.columns.get(column).map(String::as_str)
    }

    /// A metric as a number; ncu may print thousands separators, and `n/a` is `None`.
    pub fn number(&self, metric: &str) -> Option<f64> {
        let raw = self.columns.get(metric)?;
        raw.replace(',', "").trim().parse::<f64>().ok()
    }
}

/// Splits one CSV line into fields (double quotes around fields, `""` inside them).
fn split_csv_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// The launches in ncu's `--csv --page raw` output. Lines before the header (ncu's
/// `==PROF==` messages, the program's own output) are skipped; the row after the header
/// is the units.
pub fn parse_raw_csv(text: &str) -> Result<Vec<NcuRow>, ProfileError> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("\"ID\","))
        .filter(|l| l.starts_with('"'));
    let header = lines.next().map(split_csv_line).ok_or_else(|| {
        ProfileError::Csv("no header row (a line starting with \"ID\",) in ncu's output".into())
    })?;
    let unit_row = lines
        .next()
        .map(split_csv_line)
        .ok_or_else(|| ProfileError::Csv("the header is not followed by the unit row".into()))?;
    if unit_row.len() != header.len() {
        return Err(ProfileError::Csv(format!(
            "the unit row has {} fields, the header {}",
            unit_row.len(),
            header.len()
        )));
    }
    let units: BTreeMap<String, String> = header.iter().cloned().zip(unit_row).collect();
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let fields = split_csv_line(line);
        if fields.len() != header.len() {
            return Err(ProfileError::Csv(format!(
                "data row {} has {} fields, the header {}",
                n + 1,
                fields.len(),
                header.len()
            )));
        }
        rows.push(NcuRow {
            columns: header.iter().cloned().zip(fields).collect(),
            units: units.clone(),
        });
    }
    Ok(rows)
}

/// The lines of ncu's output that explain a run that profiled nothing (its `==ERROR==`
/// and `==WARNING==` lines), joined; with a hint for the counter-permission error.
pub fn ncu_failure(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("==ERROR==") || l.starts_with("==WARNING=="))
        .collect();
    let mut message = if lines.is_empty() {
        "ncu printed no error; check that the kernel runs (`evo gate`)".to_string()
    } else {
        lines.join(" | ")
    };
    if output.contains("ERR_NVGPUCTRPERM") {
        message += " (the GPU's performance counters are restricted to administrators on this \
                     machine: run as root, or load the driver with \
                     NVreg_RestrictProfilingToAdminUsers=0)";
    }
    message
}

/// One stall reason: warps stalled for it per issued instruction (or its share of the
/// PC samples when only sampling metrics are present).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    pub reason: String,
    pub value: f64,
}

/// The tensor pipe: how busy, and with which instructions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorPipe {
    /// Cycles the pipe was active, % of peak sustained over the SMs' active cycles.
    pub active_pct: Option<f64>,
    /// The metric `active_pct` was read from (the all-classes one when present).
    pub active_metric: String,
    /// wgmma instructions executed (warp level; sm__inst_executed_pipe_tensor_op_gmma).
    pub wgmma_instructions: Option<f64>,
    /// mma.sync instructions executed, wgmma included on Hopper
    /// (sm__inst_executed_pipe_tensor_op_hmma).
    pub hmma_instructions: Option<f64>,
}

impl TensorPipe {
    /// `wgmma` when wgmma instructions ran, `mma.sync` when only the others did.
    pub fn instruction_class(&self) -> &'static str {
        match (self.wgmma_instructions, self.hmma_instructions) {
            (Some(g), _) if g > 0.0 => "wgmma",
            (_, Some(h)) if h > 0.0 => "mma.sync",
            (None, None) => "not measured",
            _ => "none",
        }
    }
}

/// What `evo profile` reports of one launch; `profile.json` is this, serialised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    pub kernel: String,
    pub device: String,
    pub grid: String,
    pub block: String,
    /// gpu__time_duration.sum, in microseconds.
    pub duration_us: Option<f64>,
    /// sm__warps_active over peak, % (achieved occupancy).
    pub achieved_occupancy_pct: Option<f64>,
    /// sm__maximum_warps_per_active_cycle_pct (theoretical occupancy).
    pub theoretical_occupancy_pct: Option<f64>,
    /// sm__throughput, % of peak sustained over the elapsed time.
    pub sm_throughput_pct: Option<f64>,
    /// DRAM throughput, % of peak sustained over the elapsed time.
    pub dram_throughput_pct: Option<f64>,
    pub registers_per_thread: Option<f64>,
    pub smem_dynamic_bytes: Option<f64>,
    pub smem_static_bytes: Option<f64>,
    pub tensor_pipe: TensorPipe,
    /// The metric family the stalls were read from.
    pub stall_metric: String,
    /// The top five stall reasons, largest first.
    pub top_stalls: Vec<Stall>,
}

const STALL_RATIO: (&str, &str) = (
    "smsp__average_warps_issue_stalled_",
    "_per_issue_active.ratio",
);
const STALL_SAMPLES: &str = "smsp__pcsamp_warps_issue_stalled_";

/// How many stall reasons the summary keeps.
pub const TOP_STALLS: usize = 5;

impl ProfileSummary {
    pub fn from_row(row: &NcuRow) -> ProfileSummary {
        let first = |names: &[&str]| names.iter().find_map(|m| row.number(m));
        let (active_metric, active_pct) = [
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        ]
        .iter()
        .find_map(|m| row.number(m).map(|v| (m.to_string(), Some(v))))
        .unwrap_or_default();
        let tensor_pipe = TensorPipe {
            active_pct,
            active_metric,
            wgmma_instructions: row.number("sm__inst_executed_pipe_tensor_op_gmma.sum"),
            hmma_instructions: row.number("sm__inst_executed_pipe_tensor_op_hmma.sum"),
        };
        let (stall_metric, top_stalls) = top_stalls(row);
        ProfileSummary {
            kernel: row.text("Kernel Name").unwrap_or_default().to_string(),
            device: row
                .text("device__attribute_display_name")
                .or(row.text("Device"))
                .unwrap_or_default()
                .to_string(),
            grid: row.text("Grid Size").unwrap_or_default().to_string(),
            block: row.text("Block Size").unwrap_or_default().to_string(),
            duration_us: row.number("gpu__time_duration.sum").map(|ns| {
                // `--print-units base` gives ns; a report printed without it scales.
                match row.units.get("gpu__time_duration.sum").map(String::as_str) {
                    Some("us" | "usecond") => ns,
                    Some("ms" | "msecond") => ns * 1e3,
                    Some("s" | "second") => ns * 1e6,
                    _ => ns / 1e3,
                }
            }),
            achieved_occupancy_pct: first(&["sm__warps_active.avg.pct_of_peak_sustained_active"]),
            theoretical_occupancy_pct: first(&["sm__maximum_warps_per_active_cycle_pct"]),
            sm_throughput_pct: first(&["sm__throughput.avg.pct_of_peak_sustained_elapsed"]),
            dram_throughput_pct: first(&[
                "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            ]),
            registers_per_thread: first(&["launch__registers_per_thread"]),
            smem_dynamic_bytes: first(&["launch__shared_mem_per_block_dynamic"]),
            smem_static_bytes: first(&["launch__shared_mem_per_block_static"]),
            tensor_pipe,
            stall_metric,
            top_stalls,
        }
    }
}

/// The top stall reasons from the per-issue ratios, or from the PC samples (as a share
/// of all stalled samples) when the ratios are absent. `selected` is left out: it is
/// the issuing warp, not a stall.
fn top_stalls(row: &NcuRow) -> (String, Vec<Stall>) {
    let (prefix, suffix) = STALL_RATIO;
    let mut stalls: Vec<Stall> = row
        .columns
        .keys()
        .filter_map(|k| {
            let reason = k.strip_prefix(prefix)?.strip_suffix(suffix)?;
            Some(Stall {
                reason: reason.to_string(),
                value: row.number(k)?,
            })
        })
        .collect();
    let mut metric = format!("{prefix}<reason>{suffix}");
    if stalls.is_empty() {
        let samples: Vec<Stall> = row
            .columns
            .keys()
            .filter_map(|k| {
                let reason = k.strip_prefix(STALL_SAMPLES)?;
                let reason = reason.strip_suffix(".sum").unwrap_or(reason);
                (!reason.contains('.') && !reason.contains("not_issued")).then_some(())?;
                Some(Stall {
                    reason: reason.to_string(),
                    value: row.number(k)?,
                })
            })
            .collect();
        let total: f64 = samples
            .iter()
            .filter(|s| s.reason != "selected")
            .map(|s| s.value)
            .sum();
        if total > 0.0 {
            stalls = samples
                .into_iter()
                .map(|s| Stall {
                    value: s.value / total,
                    ..s
                })
                .collect();
            metric = format!("{STALL_SAMPLES}<reason> (share of stalled samples)");
        }
    }
    stalls.retain(|s| s.reason != "selected");
    stalls.sort_by(|a, b| b.value.total_cmp(&a.value).then(a.reason.cmp(&b.reason)));
    stalls.truncate(TOP_STALLS);
    (metric, stalls)
}

fn or_na(v: Option<f64>, digits: usize, unit: &str) -> String {
    v.map_or("n/a".to_string(), |x| format!("{x:.digits$}{unit}"))
}

impl fmt::Display for ProfileSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let smem = match (self.smem_dynamic_bytes, self.smem_static_bytes) {
            (None, None) => "n/a".to_string(),
            (d, s) => format!(
                "{:.0} B ({:.0} dynamic + {:.0} static)",
                d.unwrap_or(0.0) + s.unwrap_or(0.0),
                d.unwrap_or(0.0),
                s.unwrap_or(0.0)
            ),
        };
        let mut rows: Vec<(String, String)> = vec![
            ("kernel".into(), self.kernel.clone()),
            ("device".into(), self.device.clone()),
            (
                "grid x block".into(),
                format!("{} x {}", self.grid, self.block),
            ),
            ("duration".into(), or_na(self.duration_us, 1, " µs")),
            (
                "occupancy".into(),
                format!(
                    "{} achieved, {} theoretical",
                    or_na(self.achieved_occupancy_pct, 1, " %"),
                    or_na(self.theoretical_occupancy_pct, 1, " %")
                ),
            ),
            (
                "SM throughput".into(),
                or_na(self.sm_throughput_pct, 1, " % of peak"),
            ),
            (
                "DRAM throughput".into(),
                or_na(self.dram_throughput_pct, 1, " % of peak"),
            ),
            (
                "registers / thread".into(),
                or_na(self.registers_per_thread, 0, ""),
            ),
            ("shared memory / block".into(), smem),
        ];
        let t = &self.tensor_pipe;
        rows.push((
            "tensor pipe".into(),
            format!(
                "{} active; {} ({} wgmma, {} hmma instructions)",
                or_na(t.active_pct, 1, " %"),
                t.instruction_class(),
                or_na(t.wgmma_instructions, 0, ""),
                or_na(t.hmma_instructions, 0, "")
            ),
        ));
        for (n, s) in self.top_stalls.iter().enumerate() {
            rows.push((
                format!("stall #{}", n + 1),
                format!("{} {:.2}", s.reason, s.value),
            ));
        }
        if self.top_stalls.is_empty() {
            rows.push(("stalls".into(), "n/a (not measured)".into()));
        }
        let width = rows
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        for (k, v) in rows {
            writeln!(f, "{k:<width$}  {v}")?;
        }
        if !self.top_stalls.is_empty() {
            writeln!(f, "{:<width$}  ({})", "", self.stall_metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
