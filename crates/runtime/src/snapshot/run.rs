//! Recording and checking a snapshot on this machine's GPU: draw the inputs, upload
//! them, run the export's champion through [`Champions::forward`] on a stream of our
//! own, copy O back; then summarise it, or judge it against the snapshot.
//!
//! The GPU sits behind [`Runner`] so that the recording and checking themselves are
//! tested without one (a fake runner in the tests, as candle's dummy backend).

use crate::champions::Champions;
use crate::device::open_context;
use crate::error::{driver, RuntimeError};
use crate::export::{Export, MANIFEST_FILE};
use crate::launch::Buffers;
use crate::module::ModuleImage;
use crate::snapshot::compare::{
    champion_differences, compare, setting_differences, Comparison, Tolerance,
};
use crate::snapshot::file::{
    ChampionKernel, Entry, ExportInfo, Image, Machine, Snapshot, SNAPSHOT_FORMAT,
};
use crate::snapshot::inputs::{to_f32, Inputs, GENERATOR};
use crate::snapshot::summary::{row_name, OutputSummary};
use crate::snapshot::SnapshotError;
use cudarc::driver::sys as cu;
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use evo_genome::{Dtype, Problem};
use std::sync::Arc;

/// O is filled with this before the launch: a NaN in f16 and bf16 alike, so an element
/// the kernel never wrote cannot pass for a value.
const POISON: u16 = 0x7FFF;

/// What runs a champion: the GPU, or a fake in the tests.
pub trait Runner {
    /// The GPU and driver.
    fn machine(&self) -> &Machine;
    fn compute_capability(&self) -> (i32, i32);
    /// O of the champion `champions` dispatches `p` to, on `inputs`.
    fn output(
        &self,
        champions: &Champions,
        p: &Problem,
        inputs: &Inputs,
    ) -> Result<Vec<u16>, RuntimeError>;
}

/// One GPU with a stream of its own.
pub struct GpuRunner {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    machine: Machine,
    compute_capability: (i32, i32),
}

impl GpuRunner {
    /// GPU `ordinal`'s primary context (the one [`Champions`] launches in); without a
    /// driver or a GPU, [`RuntimeError::NoDevice`].
    pub fn open(ordinal: usize) -> Result<GpuRunner, RuntimeError> {
        let ctx = open_context(ordinal)?;
        let stream = ctx
            .new_stream()
            .map_err(driver("creating the snapshot's stream"))?;
        let device = ctx.name().map_err(driver("reading the device name"))?;
        let cc = ctx
            .compute_capability()
            .map_err(driver("reading the compute capability"))?;
        let mut version = 0i32;
        // SAFETY: the driver writes one int; it was initialised by `open_context`.
        unsafe { cu::cuDriverGetVersion(&mut version) }
            .result()
            .map_err(driver("reading the driver's CUDA version"))?;
        let machine = Machine {
            device,
            compute_capability: format!("{}.{}", cc.0, cc.1),
            cuda_driver: format!("{}.{}", version / 1000, version % 1000 / 10),
            nvidia_driver: std::fs::read_to_string("/proc/driver/nvidia/version")
                .ok()
                .and_then(|text| kernel_module_version(&text)),
        };
        Ok(GpuRunner {
            ctx,
            stream,
            machine,
            compute_capability: cc,
        })
    }
}

impl Runner for GpuRunner {
    fn machine(&self) -> &Machine {
        &self.machine
    }

    fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    fn output(
        &self,
        champions: &Champions,
        p: &Problem,
        inputs: &Inputs,
    ) -> Result<Vec<u16>, RuntimeError> {
        self.ctx
            .bind_to_thread()
            .map_err(driver("making the GPU's context current"))?;
        let upload = |host: &[u16], what: &str| {
            self.stream.clone_htod(host).map_err(driver(format!(
                "copying {what} of {} to the GPU",
                p.label()
            )))
        };
        let (q, k, v) = (
            upload(&inputs.q, "Q")?,
            upload(&inputs.k, "K")?,
            upload(&inputs.v, "V")?,
        );
        let mut o = upload(&vec![POISON; p.q_elems()], "O's poison")?;
        {
            let (q, _q) = q.device_ptr(&self.stream);
            let (k, _k) = k.device_ptr(&self.stream);
            let (v, _v) = v.device_ptr(&self.stream);
            let (o, _o) = o.device_ptr_mut(&self.stream);
            let buffers = Buffers {
                q,
                k,
                v,
                o,
                ..Buffers::default()
            };
            // SAFETY: the stream is a live stream of this GPU's primary context, the
            // one `Champions` launches in; the four buffers are ours, sized for `p`,
            // and nothing else touches them until the stream is synchronised below.
            unsafe { champions.forward(p, &buffers, self.stream.cu_stream()) }?;
        }
        self.stream
            .synchronize()
            .map_err(driver(format!("running the champion on {}", p.label())))?;
        self.stream
            .clone_dtoh(&o)
            .map_err(driver(format!("copying O of {} back", p.label())))
    }
}

/// The version in the first line of `/proc/driver/nvidia/version` (`NVRM version:
/// NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build ...`).
fn kernel_module_version(text: &str) -> Option<String> {
    text.lines()
        .next()?
        .split_whitespace()
        .find(|t| t.contains('.') && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_string)
}

/// Every class of the export in every dtype it was exported for: the shapes its
/// champions were evolved on.
pub fn export_problems(export: &Export) -> Result<Vec<Problem>, RuntimeError> {
    let mut out = Vec::new();
    for entry in &export.manifest().champions {
        let p: Problem = entry.shape.parse().map_err(|e| {
            RuntimeError::export(
                export.dir().join(MANIFEST_FILE),
                format!("champion `{}`: shape {e}", entry.class),
            )
        })?;
        out.extend(entry.kernels.iter().map(|k| Problem {
            dtype: k.dtype,
            ..p
        }));
    }
    Ok(out)
}

/// GREEN's tolerance of `dtype` as the export's manifest records it: its max abs error
/// as `atol`, its relative Frobenius error as `rtol`. Both bound a champion's distance
/// from an fp32 reference, so two correct runs stay well inside them.
pub fn manifest_tolerance(export: &Export, dtype: Dtype) -> Result<Tolerance, RuntimeError> {
    export
        .manifest()
        .tolerances
        .iter()
        .find(|t| t.dtype == dtype)
        .map(|t| Tolerance {
            atol: t.max_abs,
            rtol: t.rel_frob,
        })
        .ok_or_else(|| {
            RuntimeError::export(
                export.dir().join(MANIFEST_FILE),
                format!(
                    "records no tolerance for {dtype} (an export older than its `tolerances`); \
                     export again, or give the tolerance (--atol, --rtol)"
                ),
            )
        })
}

/// The champion's kernel the export runs `p` with on `runner`'s GPU.
fn champion_kernel(
    champions: &Champions,
    runner: &dyn Runner,
    p: &Problem,
) -> Result<ChampionKernel, RuntimeError> {
    let export = champions.export();
    let (champion, kernel) = export.choose(p)?;
    let image = match export.image(kernel, runner.compute_capability())? {
        ModuleImage::Cubin(_) => Image::Cubin,
        ModuleImage::Ptx(_) => Image::Ptx,
    };
    Ok(ChampionKernel {
        class: champion.class.clone(),
        genome_id: champion.genome_id.clone(),
        image,
    })
}

/// Runs each of `problems` on inputs drawn from `seed` and records the outputs.
/// `tolerance`: what a check will hold them to; none: the manifest's per dtype.
pub fn record(
    champions: &Champions,
    runner: &dyn Runner,
    problems: &[Problem],
    seed: u64,
    tolerance: Option<Tolerance>,
) -> Result<Snapshot, SnapshotError> {
    let mut entries = Vec::new();
    for p in problems {
        let tolerance = match tolerance {
            Some(t) => t,
            None => manifest_tolerance(champions.export(), p.dtype)?,
        };
        let champion = champion_kernel(champions, runner, p)?;
        let inputs = Inputs::draw(p, seed);
        let output = runner.output(champions, p, &inputs)?;
        let d = p.head_dim.get() as usize;
        if let Some(n) = output.iter().position(|&b| !to_f32(p.dtype, b).is_finite()) {
            return Err(SnapshotError::Run {
                problem: p.label(),
                message: format!(
                    "{} col {} is {}; a snapshot records finite outputs only",
                    row_name(p, (n / d) as u64),
                    n % d,
                    if output[n] == POISON {
                        "still the NaN O was filled with: the champion never wrote it".into()
                    } else {
                        format!("{}", to_f32(p.dtype, output[n]))
                    }
                ),
            });
        }
        entries.push(Entry {
            problem: p.spec(),
            champion,
            tolerance,
            inputs: inputs.hash(),
            output: OutputSummary::of(p, &output),
        });
    }
    Ok(Snapshot {
        format: SNAPSHOT_FORMAT,
        evo_version: env!("CARGO_PKG_VERSION").to_string(),
        machine: runner.machine().clone(),
        export: ExportInfo::of(champions.export().manifest()),
        generator: GENERATOR.to_string(),
        seed,
        entries,
    })
}

/// A check: what differs from the snapshot's setting, and each problem's comparison.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The machine the check ran on.
    pub machine: Machine,
    /// How it and the export differ from the snapshot's (the reasons an output may
    /// differ within tolerance).
    pub differences: Vec<String>,
    pub entries: Vec<EntryCheck>,
}

/// One problem checked.
#[derive(Debug, Clone)]
pub struct EntryCheck {
    pub problem: Problem,
    /// The champion that ran here, and how it differs from the one the snapshot ran.
    pub champion: ChampionKernel,
    pub champion_differences: Vec<String>,
    pub comparison: Comparison,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.entries.iter().all(|e| e.comparison.passed())
    }
}

/// Runs every problem of `snapshot` here, on the inputs it was recorded on, and
/// compares each output with its summary.
pub fn check(
    snapshot: &Snapshot,
    champions: &Champions,
    runner: &dyn Runner,
) -> Result<CheckReport, SnapshotError> {
    let mut entries = Vec::new();
    for recorded in &snapshot.entries {
        let p = recorded
            .parse_problem()
            .map_err(|message| SnapshotError::Run {
                problem: recorded.problem.clone(),
                message,
            })?;
        let champion = champion_kernel(champions, runner, &p)?;
        let inputs = Inputs::draw(&p, snapshot.seed);
        let drawn = inputs.hash();
        if drawn != recorded.inputs {
            return Err(SnapshotError::Run {
                problem: p.label(),
                message: format!(
                    "the inputs drawn here (BLAKE3 {}) are not the snapshot's ({}): this evo \
                     draws them otherwise; record the snapshot again",
                    &drawn[..16],
                    &recorded.inputs[..16]
                ),
            });
        }
        let output = runner.output(champions, &p, &inputs)?;
        entries.push(EntryCheck {
            comparison: compare(&recorded.output, p.dtype, &output, recorded.tolerance),
            champion_differences: champion_differences(&recorded.champion, &champion),
            champion,
            problem: p,
        });
    }
    let export = ExportInfo::of(champions.export().manifest());
    Ok(CheckReport {
        machine: runner.machine().clone(),
        differences: setting_differences(snapshot, runner.machine(), &export),
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{ChampionEntry, KernelEntry, Manifest, ToleranceEntry, MANIFEST_FORMAT};
    use std::path::Path;

    const CLASS: &str = "b1-h2-l64-d64";

    /// An export of one class (B1 H2 L64 D64) in f16 and bf16 whose kernels are PTX for
    /// sm_90, never loaded: the fake runner computes instead.
    fn export(dir: &Path) -> Champions {
        std::fs::write(
            dir.join("dispatch.toml"),
            format!(
                "device = \"Fake GPU\"\n[[class]]\nname = \"{CLASS}\"\nshape = \
                 \"1,2,64,64,64,f16\"\nchampion = \"{CLASS}.toml\"\nexperiment = \"none\"\n"
            ),
        )
        .unwrap();
        std::fs::create_dir(dir.join("kernels")).unwrap();
        let kernels = Dtype::ALL
            .map(|dtype| {
                let ptx = format!("kernels/{}.ptx", KernelEntry::file_stem(CLASS, dtype));
                std::fs::write(dir.join(&ptx), "// PTX").unwrap();
                KernelEntry {
                    dtype,
                    arch: "sm_90".into(),
                    ptx,
                    cubin: None,
                }
            })
            .to_vec();
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            evo_version: "0.1.0".into(),
            nvrtc_version: "13.5".into(),
            device: "Fake GPU".into(),
            arch: "sm_90".into(),
            dispatch: "dispatch.toml".into(),
            library: None,
            champions: vec![ChampionEntry {
                class: CLASS.into(),
                shape: "1,2,64,64,64,f16".into(),
                batch: 1,
                heads: 2,
                q_len: 64,
                kv_len: 64,
                head_dim: 64,
                causal: false,
                genome: "fake".into(),
                genome_id: "0123456789abcdef".into(),
                family: "ampere".into(),
                median_us: None,
                cudnn_us: None,
                measured_dtype: None,
                bench: None,
                experiment: "none".into(),
                kernels,
                lse_kernels: Vec::new(),
            }],
            tolerances: vec![ToleranceEntry {
                dtype: Dtype::F16,
                rel_frob: 1.5e-3,
                max_abs: 1e-2,
            }],
            backward: Vec::new(),
        };
        std::fs::write(
            dir.join(MANIFEST_FILE),
            serde_json::to_string(&manifest).unwrap(),
        )
        .unwrap();
        Champions::open(dir).unwrap()
    }

    /// A GPU that answers O = Q, then `edit`s it.
    struct FakeRunner {
        machine: Machine,
        edit: fn(&mut Vec<u16>),
    }

    impl FakeRunner {
        fn new(device: &str, edit: fn(&mut Vec<u16>)) -> FakeRunner {
            FakeRunner {
                machine: Machine {
                    device: device.into(),
                    compute_capability: "9.0".into(),
                    cuda_driver: "13.0".into(),
                    nvidia_driver: None,
                },
                edit,
            }
        }
    }

    impl Runner for FakeRunner {
        fn machine(&self) -> &Machine {
            &self.machine
        }

        fn compute_capability(&self) -> (i32, i32) {
            (9, 0)
        }

        fn output(
            &self,
            _: &Champions,
            _: &Problem,
            inputs: &Inputs,
        ) -> Result<Vec<u16>, RuntimeError> {
            let mut o = inputs.q.clone();
            (self.edit)(&mut o);
            Ok(o)
        }
    }

    fn f16_problem() -> Problem {
        "1,2,64,64,64,f16".parse().unwrap()
    }

    /// A snapshot of `f16_problem` on the fake GPU, seed 5.
    fn recorded(champions: &Champions) -> Snapshot {
        record(
            champions,
            &FakeRunner::new("Fake GPU", |_| {}),
            &[f16_problem()],
            5,
            None,
        )
        .unwrap()
    }

    #[test]
    fn the_export_gives_every_class_in_every_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let champions = export(dir.path());
        let problems = export_problems(champions.export()).unwrap();
        let specs: Vec<String> = problems.iter().map(|p| p.spec()).collect();
        assert_eq!(specs, ["1,2,64,64,64,f16", "1,2,64,64,64,bf16"]);
        let e = manifest_tolerance(champions.export(), Dtype::Bf16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("manifest.json") && e.contains("--atol"), "{e}");
    }

    #[test]
    fn a_recorded_snapshot_checks_identical_on_the_same_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let champions = export(dir.path());
        let gpu = FakeRunner::new("Fake GPU", |_| {});
        let s = record(&champions, &gpu, &[f16_problem()], 5, None).unwrap();
        let entry = &s.entries[0];
        assert_eq!((s.seed, s.generator.as_str()), (5, GENERATOR));
        assert_eq!(
            entry.champion,
            ChampionKernel {
                class: CLASS.into(),
                genome_id: "0123456789abcdef".into(),
                image: Image::Ptx,
            }
        );
        assert_eq!(
            entry.tolerance,
            Tolerance {
                atol: 1e-2,
                rtol: 1.5e-3
            }
        );
        let report = check(&s, &champions, &gpu).unwrap();
        assert!(report.passed() && report.differences.is_empty());
        let c = &report.entries[0].comparison;
        assert_eq!((c.identical_rows, c.within_rows, c.out_rows), (128, 0, 0));
    }

    #[test]
    fn another_gpu_within_tolerance_passes_and_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let champions = export(dir.path());
        let s = recorded(&champions);
        // One ulp off in every element of the first 10 rows.
        let other = FakeRunner::new("Other GPU", |o| o[..640].iter_mut().for_each(|b| *b ^= 1));
        let report = check(&s, &champions, &other).unwrap();
        assert!(report.passed());
        assert_eq!(report.differences, ["device Fake GPU -> Other GPU"]);
        let c = &report.entries[0].comparison;
        assert_eq!((c.identical_rows, c.within_rows, c.out_rows), (118, 10, 0));
    }

    #[test]
    fn a_wrong_output_fails_the_check_at_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let champions = export(dir.path());
        let s = recorded(&champions);
        // Row 77 (b=0 h=1 i=13), column 45: sampled (rows 76 and 77 are a chunk).
        let wrong = FakeRunner::new("Fake GPU", |o| o[77 * 64 + 45] ^= 0x4000);
        let report = check(&s, &champions, &wrong).unwrap();
        assert!(!report.passed());
        let c = &report.entries[0].comparison;
        assert_eq!(c.out_rows, 2);
        let line = c.mismatches[0].describe(&report.entries[0].problem);
        assert!(line.starts_with("row 77 (b=0 h=1 i=13) col 45: "), "{line}");
    }

    #[test]
    fn a_nan_output_is_not_recorded_and_other_inputs_are_not_checked() {
        let dir = tempfile::tempdir().unwrap();
        let champions = export(dir.path());
        let unwritten = FakeRunner::new("Fake GPU", |o| o[64 * 3 + 2] = POISON);
        let e = record(&champions, &unwritten, &[f16_problem()], 5, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("row 3 (b=0 h=0 i=3) col 2") && e.contains("never wrote it"),
            "{e}"
        );

        let gpu = FakeRunner::new("Fake GPU", |_| {});
        let mut s = record(&champions, &gpu, &[f16_problem()], 5, None).unwrap();
        s.seed = 6;
        let e = check(&s, &champions, &gpu).unwrap_err().to_string();
        assert!(e.contains("the inputs drawn here"), "{e}");
    }

    #[test]
    fn the_driver_version_is_read_from_the_kernel_module_line() {
        let closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build  (dvs-builder@U16)  Thu Oct  9 2025\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(kernel_module_version(closed).as_deref(), Some("580.159.04"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U22)\n";
        assert_eq!(kernel_module_version(open).as_deref(), Some("570.86.15"));
        assert_eq!(kernel_module_version(""), None);
    }
}
