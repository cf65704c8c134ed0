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
mod tests {
    use super::*;

    const H100_FA3: &str = include_str!("../tests/fixtures/ncu_h100_fa3.csv");
    const H100_FA2: &str = include_str!("../tests/fixtures/ncu_h100_fa2.csv");

    #[test]
    fn quoted_fields_keep_their_commas_and_quotes() {
        assert_eq!(
            split_csv_line(r#""a","1,024","say ""hi""",x"#),
            vec!["a", "1,024", r#"say "hi""#, "x"]
        );
    }

    #[test]
    fn thousands_separators_and_na_are_read() {
        let text =
            "==PROF== Connected\n\"ID\",\"m\",\"n\"\n\"\",\"byte\",\"\"\n\"0\",\"1,024\",\"n/a\"\n";
        let rows = parse_raw_csv(text).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].number("m"), Some(1024.0));
        assert_eq!(rows[0].number("n"), None);
        assert_eq!(rows[0].units["m"], "byte");
    }

    #[test]
    fn scaled_durations_are_read_in_their_unit() {
        let text = "\"ID\",\"gpu__time_duration.sum\"\n\"\",\"ms\"\n\"0\",\"1.5\"\n";
        let s = ProfileSummary::from_row(&parse_raw_csv(text).unwrap()[0]);
        assert_eq!(s.duration_us, Some(1500.0));
    }

    #[test]
    fn output_without_a_header_is_an_error_not_an_empty_profile() {
        let err = parse_raw_csv("==PROF== Disconnected\n==WARNING== No kernels were profiled.\n")
            .unwrap_err();
        assert!(err.to_string().contains("no header row"), "{err}");
    }

    #[test]
    fn a_ragged_row_is_an_error() {
        let err = parse_raw_csv("\"ID\",\"a\"\n\"\",\"\"\n\"0\"\n").unwrap_err();
        assert!(err.to_string().contains("data row 1 has 1 fields"), "{err}");
    }

    #[test]
    fn the_failure_message_keeps_ncus_errors_and_explains_counter_permissions() {
        let out = "==PROF== Connected to process 7\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\nother\n";
        let m = ncu_failure(out);
        assert!(m.starts_with("==ERROR== ERR_NVGPUCTRPERM"), "{m}");
        assert!(m.contains("NVreg_RestrictProfilingToAdminUsers=0"), "{m}");
        assert!(!m.contains("other"), "{m}");
    }

    #[test]
    fn query_output_gives_base_names_and_filters_the_tensor_metrics() {
        let q = "Device NVIDIA H100 (GH100)\n----- -----\nMetric Name   Metric Description\n\
                 sm__pipe_tensor_op_gmma_cycles_active   # of cycles where the gmma pipe was active\n\
                 sm__inst_executed_pipe_tensor_op_gmma   # of warp instructions executed by the gmma pipe\n";
        let names = parse_metric_names(q);
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(
            available_tensor_metrics(&names),
            vec![
                "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                "sm__inst_executed_pipe_tensor_op_gmma.sum"
            ]
        );
        let recorded = include_bytes!("../tests/fixtures/ncu_h100_query_tensor.txt");
        let names = parse_metric_names(std::str::from_utf8(recorded).unwrap());
        assert_eq!(
            available_tensor_metrics(&names),
            vec![
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                "sm__inst_executed_pipe_tensor_op_gmma.sum",
                "sm__inst_executed_pipe_tensor_op_hmma.sum"
            ]
        );
    }

    #[test]
    fn ncu_is_searched_on_path_then_cuda_home_and_every_place_is_named() {
        let dir = std::env::temp_dir().join(format!("evo-find-ncu-{}", std::process::id()));
        let bin = dir.join("home").join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let path = empty.display().to_string();
        let home = dir.join("home").display().to_string();
        if !Path::new("/usr/local/cuda/bin/ncu").exists() {
            let err = find_ncu(Some(&path), Some(&home)).unwrap_err().to_string();
            assert!(err.contains("needs NVIDIA Nsight Compute (`ncu`)"), "{err}");
            assert!(err.contains(&path), "{err}");
            assert!(err.contains(&format!("{home}/bin")), "{err}");
            assert!(err.contains("/usr/local/cuda/bin"), "{err}");
        }
        std::fs::write(bin.join("ncu"), "").unwrap();
        assert_eq!(find_ncu(Some(&path), Some(&home)).unwrap(), bin.join("ncu"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_arguments_profile_one_launch_of_the_forward_kernel_without_clock_control() {
        let args = ncu_args(
            2,
            &["a.sum".into(), "b.sum".into()],
            &["evo".into(), "x".into()],
        );
        let joined = args.join(" ");
        assert!(joined.starts_with("--clock-control none --target-processes all --kernel-name evo_attention_fwd --launch-skip 2 --launch-count 1 --csv --page raw"), "{joined}");
        assert!(joined.ends_with("--metrics a.sum,b.sum evo x"), "{joined}");
        assert!(joined.contains("--section WarpStateStats"), "{joined}");
    }

    /// The CSVs recorded on an H100 (experiments/2026-11-23-h100-profile/): every
    /// figure of the summary is read from its own metric.
    #[test]
    fn the_recorded_h100_profiles_are_summarised() {
        for (text, class, grid) in [
            (H100_FA3, "wgmma", "(32, 32, 1)"),
            (H100_FA2, "mma.sync", "(64, 32, 1)"),
        ] {
            let rows = parse_raw_csv(text).unwrap();
            assert_eq!(rows.len(), 1);
            let row = &rows[0];
            let s = ProfileSummary::from_row(row);
            assert_eq!(s.kernel, "evo_attention_fwd");
            assert_eq!(s.device, "NVIDIA H100 80GB HBM3");
            assert_eq!(s.grid, grid);
            let ns = row.number("gpu__time_duration.sum").unwrap();
            assert_eq!(row.units["gpu__time_duration.sum"], "ns");
            assert!((s.duration_us.unwrap() - ns / 1e3).abs() < 1e-9);
            assert_eq!(
                s.registers_per_thread,
                row.number("launch__registers_per_thread")
            );
            assert_eq!(
                s.achieved_occupancy_pct,
                row.number("sm__warps_active.avg.pct_of_peak_sustained_active")
            );
            for v in [s.sm_throughput_pct, s.dram_throughput_pct] {
                let v = v.expect("measured");
                assert!(v > 0.0 && v <= 100.0, "{v}");
            }
            assert!(s.smem_dynamic_bytes.unwrap() > 0.0);
            assert_eq!(s.smem_static_bytes, Some(0.0));
            assert_eq!(s.tensor_pipe.instruction_class(), class);
            assert_eq!(
                s.tensor_pipe.active_metric,
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
            );
            assert!(s.tensor_pipe.active_pct.unwrap() > 10.0);
            assert_eq!(s.top_stalls.len(), TOP_STALLS);
            assert!(s.top_stalls.windows(2).all(|w| w[0].value >= w[1].value));
            assert!(s.top_stalls.iter().all(|t| t.reason != "selected"));
            let table = s.to_string();
            assert!(table.contains("stall #5"), "{table}");
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<ProfileSummary>(&json).unwrap(), s);
        }
    }

    /// The recorded wgmma kernel's figures, as read off its CSV by hand.
    #[test]
    fn the_recorded_wgmma_profile_has_its_figures() {
        let s = ProfileSummary::from_row(&parse_raw_csv(H100_FA3).unwrap()[0]);
        assert_eq!(s.duration_us, Some(479.776));
        assert_eq!(s.registers_per_thread, Some(168.0));
        assert_eq!(s.smem_dynamic_bytes, Some(165_120.0));
        assert_eq!(s.tensor_pipe.wgmma_instructions, Some(4_194_304.0));
        assert_eq!(s.tensor_pipe.active_pct, Some(64.99));
        let top: Vec<&str> = s.top_stalls.iter().map(|t| t.reason.as_str()).collect();
        assert_eq!(
            top,
            [
                "wait",
                "long_scoreboard",
                "dispatch_stall",
                "barrier",
                "not_selected"
            ]
        );
    }

    #[test]
    fn pc_samples_rank_stalls_when_the_ratios_are_absent() {
        let text = "\"ID\",\"smsp__pcsamp_warps_issue_stalled_long_scoreboard\",\"smsp__pcsamp_warps_issue_stalled_barrier\",\"smsp__pcsamp_warps_issue_stalled_selected\"\n\
                    \"\",\"\",\"\",\"\"\n\"0\",\"30\",\"10\",\"60\"\n";
        let s = ProfileSummary::from_row(&parse_raw_csv(text).unwrap()[0]);
        assert_eq!(
            s.top_stalls,
            vec![
                Stall {
                    reason: "long_scoreboard".into(),
                    value: 0.75
                },
                Stall {
                    reason: "barrier".into(),
                    value: 0.25
                }
            ]
        );
        assert!(s.stall_metric.contains("pcsamp"), "{}", s.stall_metric);
    }
}
