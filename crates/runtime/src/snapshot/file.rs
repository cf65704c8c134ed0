//! The snapshot file: JSON, read back strictly.
//!
//! A reader checks `format` before anything else, so that a file of another format is
//! refused as such rather than as a list of unexpected fields; then every field's
//! type (an error names the field's path, `entries[2].output.chunks[5].sum`) and the
//! relations between fields (a summary the size of its problem, a sample row inside
//! its chunk). A snapshot is a reference to hold kernels to: a damaged one must not
//! pass or fail them for the wrong reason.
//!
//! It is written with serde_json's pretty layout down to the chunk list and each chunk
//! on one line, so that two snapshots diff chunk by chunk.

use crate::export::Manifest;
use crate::snapshot::compare::Tolerance;
use crate::snapshot::inputs::GENERATOR;
use crate::snapshot::summary::OutputSummary;
use crate::snapshot::SnapshotError;
use evo_genome::Problem;
use serde::{Deserialize, Serialize};
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};
use std::io::{self, Write};
use std::path::Path;

/// The format this evo writes and reads; a change that older readers cannot follow
/// raises it.
pub const SNAPSHOT_FORMAT: u32 = 1;

/// A snapshot: where it was recorded, from which export, on which inputs, and one
/// summary per problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// [`SNAPSHOT_FORMAT`].
    pub format: u32,
    /// The evo that recorded it (its Cargo version).
    pub evo_version: String,
    pub machine: Machine,
    pub export: ExportInfo,
    /// How the inputs were drawn: [`GENERATOR`].
    pub generator: String,
    pub seed: u64,
    pub entries: Vec<Entry>,
}

/// The GPU and driver a snapshot was recorded or checked on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// The GPU as the driver names it (`NVIDIA H100 80GB HBM3`).
    pub device: String,
    /// `major.minor`.
    pub compute_capability: String,
    /// The CUDA version the driver implements (`cuDriverGetVersion`), `major.minor`:
    /// its JIT compiles an export's PTX.
    pub cuda_driver: String,
    /// The NVIDIA kernel module's version (`/proc/driver/nvidia/version`), where the
    /// machine shows it.
    #[serde(default)]
    pub nvidia_driver: Option<String>,
}

/// The export whose champions ran, from its manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportInfo {
    /// The GPU the champions were evolved on.
    pub device: String,
    pub arch: String,
    pub evo_version: String,
    pub nvrtc_version: String,
}

impl ExportInfo {
    pub fn of(manifest: &Manifest) -> ExportInfo {
        ExportInfo {
            device: manifest.device.clone(),
            arch: manifest.arch.clone(),
            evo_version: manifest.evo_version.clone(),
            nvrtc_version: manifest.nvrtc_version.clone(),
        }
    }
}

/// Which of a kernel's images the driver loaded: the CUBIN the bench timed, or the PTX
/// its JIT compiled (whose code may differ between drivers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Image {
    Cubin,
    Ptx,
}

impl std::fmt::Display for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Image::Cubin => "CUBIN",
            Image::Ptx => "PTX",
        })
    }
}

/// One problem: the champion that ran it and its output's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The problem as a spec (`B,H,Lq,Lk,D,dtype[,options]`, as `--problem` takes it).
    pub problem: String,
    pub champion: ChampionKernel,
    /// What a check holds each element to.
    pub tolerance: Tolerance,
    /// BLAKE3 of the inputs, Q ‖ K ‖ V ([`crate::snapshot::Inputs::hash`]).
    pub inputs: String,
    pub output: OutputSummary,
}

/// The champion's kernel that ran a problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChampionKernel {
    /// The class in the export's dispatch table.
    pub class: String,
    /// The genome's id: same id, same kernel source.
    pub genome_id: String,
    pub image: Image,
}

impl Entry {
    /// The problem, parsed (checked when the file was read).
    pub fn parse_problem(&self) -> Result<Problem, String> {
        self.problem.parse()
    }
}

impl Snapshot {
    /// Reads and checks a snapshot; errors name the file and the field.
    pub fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SnapshotError::file(path, format!("cannot read it: {e}")))?;
        Snapshot::parse(&text).map_err(|message| SnapshotError::file(path, message))
    }

    /// Writes the snapshot as JSON, one chunk a line, through a temporary sibling and a
    /// rename: an interrupted write leaves the old file or none, never half a snapshot.
    pub fn write(&self, path: &Path) -> Result<(), SnapshotError> {
        let name = path
            .file_name()
            .ok_or_else(|| SnapshotError::file(path, "cannot write it: not a file name"))?;
        let tmp = path.with_file_name(format!(
            ".{}.{}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let written =
            std::fs::write(&tmp, self.to_json()).and_then(|()| std::fs::rename(&tmp, path));
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            SnapshotError::file(path, format!("cannot write it: {e}"))
        })
    }

    /// The JSON text [`Snapshot::write`] writes.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, ShallowPretty::new(5));
        self.serialize(&mut ser)
            .expect("a snapshot serializes: strings, integers and finite floats");
        let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
        text.push('\n');
        text
    }

    /// A small well-formed snapshot of one entry on `spec` (synthetic outputs, an H100
    /// export's header): what the tests of this file and the parsers' fuzz test mutate.
    #[doc(hidden)]
    pub fn example(spec: &str, class: &str) -> Snapshot {
        let p: Problem = spec.parse().expect("an example's spec parses");
        let output: Vec<u16> = (0..p.q_elems())
            .map(|n| (n % 300) as u16 + 0x3C00)
            .collect();
        Snapshot {
            format: SNAPSHOT_FORMAT,
            evo_version: "0.1.0".into(),
            machine: Machine {
                device: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: "9.0".into(),
                cuda_driver: "13.0".into(),
                nvidia_driver: Some("580.159.04".into()),
            },
            export: ExportInfo {
                device: "NVIDIA H100 80GB HBM3".into(),
                arch: "sm_90a".into(),
                evo_version: "0.1.0".into(),
                nvrtc_version: "13.5".into(),
            },
            generator: GENERATOR.into(),
            seed: 1,
            entries: vec![Entry {
                problem: p.spec(),
                champion: ChampionKernel {
                    class: class.into(),
                    genome_id: "c0ae42df049485d5".into(),
                    image: Image::Ptx,
                },
                tolerance: Tolerance {
                    atol: 5e-2,
                    rtol: 1.2e-2,
                },
                inputs: blake3::hash(b"inputs").to_hex().to_string(),
                output: OutputSummary::of(&p, &output),
            }],
        }
    }

    /// Parses and checks the JSON text of a snapshot.
    pub fn parse(text: &str) -> Result<Snapshot, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match value.get("format") {
            None => {
                return Err(
                    "no field `format`: not a snapshot written by `evo snapshot`".to_string(),
                )
            }
            Some(f) if f.as_u64() != Some(SNAPSHOT_FORMAT as u64) => {
                let by = value
                    .get("evo_version")
                    .and_then(|v| v.as_str())
                    .map(|v| format!(" (evo {v})"))
                    .unwrap_or_default();
                return Err(format!(
                    "field `format` is {f}, but this evo ({}) reads format {SNAPSHOT_FORMAT}; \
                     check it with the evo that recorded it{by}, or record it again",
                    env!("CARGO_PKG_VERSION")
                ));
            }
            Some(_) => {}
        }
        let snapshot: Snapshot = serde_path_to_error::deserialize(value)
            .map_err(|e| format!("field `{}`: {}", e.path(), e.inner()))?;
        snapshot.check()?;
        Ok(snapshot)
    }

    /// The relations between fields that their types do not hold.
    fn check(&self) -> Result<(), String> {
        if self.generator != GENERATOR {
            return Err(format!(
                "field `generator` is `{}`, but this evo draws inputs with `{GENERATOR}`; \
                 record the snapshot again",
                self.generator
            ));
        }
        if self.entries.is_empty() {
            return Err("field `entries` is empty: nothing to check".into());
        }
        for (i, e) in self.entries.iter().enumerate() {
            let field = |name: &str, message: String| {
                format!("field `entries[{i}].{name}` ({}): {message}", e.problem)
            };
            let p = e.parse_problem().map_err(|m| field("problem", m))?;
            hex_hash(&e.inputs).map_err(|m| field("inputs", m))?;
            let t = e.tolerance;
            if !(t.atol >= 0.0 && t.rtol >= 0.0 && t.atol.is_finite() && t.rtol.is_finite()) {
                return Err(field(
                    "tolerance",
                    format!(
                        "atol {} and rtol {} must be finite and >= 0",
                        t.atol, t.rtol
                    ),
                ));
            }
            let o = &e.output;
            let rows = p.batch as u64 * p.heads as u64 * p.q_len as u64;
            if o.rows != rows || o.row_len != p.head_dim.get() {
                return Err(field(
                    "output",
                    format!(
                        "{} rows of {} are not the problem's {rows} rows (B·H·Lq) of {} (D)",
                        o.rows,
                        o.row_len,
                        p.head_dim.get()
                    ),
                ));
            }
            if o.rows_per_chunk == 0 || o.chunks.len() as u64 != rows.div_ceil(o.rows_per_chunk) {
                return Err(field(
                    "output.chunks",
                    format!(
                        "{} chunks of {} rows do not cover {rows} rows",
                        o.chunks.len(),
                        o.rows_per_chunk
                    ),
                ));
            }
            if let Some(c) = o.sample_cols.iter().find(|&&c| c >= o.row_len) {
                return Err(field(
                    "output.sample_cols",
                    format!("column {c} is past the row's {} columns", o.row_len),
                ));
            }
            for (k, c) in o.chunks.iter().enumerate() {
                let chunk = |name: &str, message: String| {
                    field(&format!("output.chunks[{k}].{name}"), message)
                };
                hex_hash(&c.hash).map_err(|m| chunk("hash", m))?;
                if !(c.sum.is_finite() && c.sum_sq.is_finite() && c.sum_sq >= 0.0) {
                    return Err(chunk(
                        "sum_sq",
                        format!(
                            "sum {} and sum_sq {} must be finite, sum_sq >= 0",
                            c.sum, c.sum_sq
                        ),
                    ));
                }
                let range = o.chunk_rows(k);
                if !range.contains(&c.sample_row) {
                    return Err(chunk(
                        "sample_row",
                        format!("row {} is outside the chunk's rows {range:?}", c.sample_row),
                    ));
                }
                if c.samples.len() != o.sample_cols.len()
                    || c.samples.iter().any(|x| !x.is_finite())
                {
                    return Err(chunk(
                        "samples",
                        format!(
                            "{} values for {} sample columns; each must be finite",
                            c.samples.len(),
                            o.sample_cols.len()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A BLAKE3 hash as [`blake3::Hash::to_hex`] writes it.
fn hex_hash(s: &str) -> Result<(), String> {
    if s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(format!(
            "`{s}` is not a BLAKE3 hash (64 lowercase hex digits)"
        ))
    }
}

/// serde_json's pretty layout for the outer `limit` levels of nesting and its compact
/// one inside them. Every call of one array or object goes to the same formatter, so
/// the pretty one's indentation stays balanced.
struct ShallowPretty {
    pretty: PrettyFormatter<'static>,
    /// Arrays and objects open around the current call.
    depth: usize,
    limit: usize,
}

impl ShallowPretty {
    fn new(limit: usize) -> ShallowPretty {
        ShallowPretty {
            pretty: PrettyFormatter::new(),
            depth: 0,
            limit,
        }
    }
}

/// Forwards a call to the pretty formatter within the limit, else to the compact one.
macro_rules! by_depth {
    ($self:ident.$call:ident($($arg:expr),*)) => {
        if $self.depth <= $self.limit {
            $self.pretty.$call($($arg),*)
        } else {
            CompactFormatter.$call($($arg),*)
        }
    };
}

impl Formatter for ShallowPretty {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        by_depth!(self.begin_array(w))
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        let r = by_depth!(self.end_array(w));
        self.depth -= 1;
        r
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        by_depth!(self.begin_array_value(w, first))
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        by_depth!(self.end_array_value(w))
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        by_depth!(self.begin_object(w))
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        let r = by_depth!(self.end_object(w));
        self.depth -= 1;
        r
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        by_depth!(self.begin_object_key(w, first))
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        by_depth!(self.begin_object_value(w))
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        by_depth!(self.end_object_value(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        Snapshot::example("1,2,40,40,64,bf16", "b1-h2-l40-d64")
    }

    /// A change to a snapshot's JSON value.
    type Edit = fn(&mut serde_json::Value);

    /// The snapshot's JSON with `edit` applied to its value.
    fn edited(edit: Edit) -> String {
        let mut v: serde_json::Value = serde_json::from_str(&snapshot().to_json()).unwrap();
        edit(&mut v);
        v.to_string()
    }

    #[test]
    fn a_snapshot_reads_back_as_written_one_chunk_a_line() {
        let s = snapshot();
        let text = s.to_json();
        assert_eq!(Snapshot::parse(&text).unwrap(), s);
        let chunk_lines: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("{\"hash\":"))
            .collect();
        assert_eq!(chunk_lines.len(), s.entries[0].output.chunks.len());
        assert!(
            chunk_lines[0].trim_end().ends_with("]},"),
            "{}",
            chunk_lines[0]
        );
        assert!(text.contains("\n  \"seed\": 1,\n"), "{text}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        s.write(&path).unwrap();
        assert_eq!(Snapshot::read(&path).unwrap(), s);
    }

    #[test]
    fn another_format_is_refused_before_its_fields_are_read() {
        let text = edited(|v| {
            v["format"] = 2.into();
            v["entries"] = "anything".into();
        });
        let e = Snapshot::parse(&text).unwrap_err();
        assert!(
            e.starts_with("field `format` is 2, but this evo")
                && e.contains("reads format 1")
                && e.contains("(evo 0.1.0)"),
            "{e}"
        );
        let e = Snapshot::parse("{\"seed\": 1}").unwrap_err();
        assert!(
            e.contains("no field `format`") && e.contains("evo snapshot"),
            "{e}"
        );
    }

    #[test]
    fn a_corrupt_file_names_the_file_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broken.json");
        std::fs::write(&path, &snapshot().to_json()[..500]).unwrap();
        let e = Snapshot::read(&path).unwrap_err().to_string();
        assert!(
            e.starts_with(&path.display().to_string()) && e.contains("not JSON"),
            "{e}"
        );
        let e = Snapshot::read(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.json: cannot read it"), "{e}");

        let cases: [(&str, Edit); 8] = [
            (
                "field `entries[0].output.chunks[3].sum`: invalid type: string",
                |v| v["entries"][0]["output"]["chunks"][3]["sum"] = "x".into(),
            ),
            (
                "field `machine`: missing field `device`",
                |v| {
                    v["machine"].as_object_mut().unwrap().remove("device");
                },
            ),
            (
                "field `entries[0].champion.clas`: unknown field `clas`",
                |v| v["entries"][0]["champion"]["clas"] = "x".into(),
            ),
            (
                "field `entries[0].output.chunks[2].hash` (1,2,40,40,64,bf16): `abc` is not a BLAKE3 hash",
                |v| v["entries"][0]["output"]["chunks"][2]["hash"] = "abc".into(),
            ),
            (
                "field `entries[0].output.chunks[5].sample_row` (1,2,40,40,64,bf16): row 70 is outside",
                |v| v["entries"][0]["output"]["chunks"][5]["sample_row"] = 70.into(),
            ),
            (
                "field `entries[0].output` (1,1,40,40,64,bf16): 80 rows of 64 are not the problem's 40 rows",
                |v| v["entries"][0]["problem"] = "1,1,40,40,64,bf16".into(),
            ),
            (
                "field `entries[0].output.chunks` (1,2,40,40,64,bf16): 39 chunks of 2 rows",
                |v| {
                    v["entries"][0]["output"]["chunks"].as_array_mut().unwrap().pop();
                },
            ),
            (
                "field `generator` is `philox`",
                |v| v["generator"] = "philox".into(),
            ),
        ];
        for (want, edit) in cases {
            let e = Snapshot::parse(&edited(edit)).unwrap_err();
            assert!(e.starts_with(want), "wanted `{want}`, got `{e}`");
        }
    }
}
