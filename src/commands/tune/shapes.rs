//! The shapes a tune covers: a preset's (`--model`, see [`super::models`]), or given as
//! `--problem SPEC` (repeatable) or `--problems FILE`, one spec a line.
//!
//! A problems file is read strictly, like a spec: a line that does not parse is refused
//! with the file, the line and the form, not skipped, since a tune that silently left a
//! shape out would look complete.

use super::{models, TuneArgs};
use anyhow::{bail, Context};
use evo_genome::{Dtype, Problem, SPEC_FORM};
use std::path::Path;

/// The shapes asked for, if any: a preset's or the given specs, each once.
pub fn asked(args: &TuneArgs) -> anyhow::Result<Option<Vec<Problem>>> {
    let shapes = if let Some(name) = &args.model {
        let preset = models::preset(name).map_err(anyhow::Error::msg)?;
        let prefill = match &args.prefill {
            Some(text) => {
                models::parse_prefill(text).map_err(|e| anyhow::anyhow!("--prefill {e}"))?
            }
            None => models::DEFAULT_PREFILL.to_vec(),
        };
        let decode = match &args.decode {
            Some(text) => {
                models::parse_decode(text).map_err(|e| anyhow::anyhow!("--decode {e}"))?
            }
            None => models::DEFAULT_DECODE.to_vec(),
        };
        let dtype = match args.dtype.as_deref() {
            Some("bf16") => Dtype::Bf16,
            _ => Dtype::F16,
        };
        preset.shapes(&prefill, &decode, dtype)
    } else if let Some(file) = &args.problems_file {
        from_file(file)?
    } else if !args.problems.is_empty() {
        from_specs(&args.problems)?
    } else {
        return Ok(None);
    };
    if args.dtype.is_some() && args.model.is_none() {
        bail!("--dtype sets a preset's dtype; a spec states its own (…,f16 or …,bf16)");
    }
    if shapes.is_empty() {
        bail!("--prefill none and --decode none leave no shape to tune; keep one of them");
    }
    let (kept, dropped) = dedup(shapes);
    for p in dropped {
        eprintln!("note: {} is given twice; it is searched once", p.spec());
    }
    Ok(Some(kept))
}

/// The `--problem` specs, each parsed; the error names the option and the spec.
pub fn from_specs(specs: &[String]) -> anyhow::Result<Vec<Problem>> {
    specs
        .iter()
        .map(|s| {
            s.parse::<Problem>()
                .map_err(|e| anyhow::anyhow!("--problem {e}"))
        })
        .collect()
}

/// The specs of a problems file: one a line; `#` starts a comment, blank lines are
/// skipped.
pub fn from_file(path: &Path) -> anyhow::Result<Vec<Problem>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--problems {}: cannot read", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let spec = line.split('#').next().unwrap_or("").trim();
        if spec.is_empty() {
            continue;
        }
        let problem: Problem = spec.parse().map_err(|e: String| {
            anyhow::anyhow!(
                "{}:{}: {e}; write one spec a line as {SPEC_FORM}, or comment the line out with #",
                path.display(),
                i + 1
            )
        })?;
        out.push(problem);
    }
    if out.is_empty() {
        bail!(
            "--problems {}: no spec in it; write one a line as {SPEC_FORM}",
            path.display()
        );
    }
    Ok(out)
}

/// The shapes in their order, each once: a shape given twice would be searched twice
/// into one folder. Returns the repeats dropped, for a note.
pub fn dedup(shapes: Vec<Problem>) -> (Vec<Problem>, Vec<Problem>) {
    let mut kept: Vec<Problem> = Vec::new();
    let mut dropped = Vec::new();
    for p in shapes {
        if kept
            .iter()
            .any(|k| super::search_name(k) == super::search_name(&p))
        {
            dropped.push(p);
        } else {
            kept.push(p);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problems_file_skips_comments_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shapes.txt");
        std::fs::write(
            &path,
            "# prefill\n1,32,4096,4096,128,f16,causal,kv=8  # llama\n\n16,32,1,8192,128,f16,causal=br,kv=8\n",
        )
        .unwrap();
        let shapes = from_file(&path).unwrap();
        assert_eq!(shapes.len(), 2);
        std::fs::write(&path, "1,8,512,512,64,f16\n1,8,512,512,65,f16\n").unwrap();
        let e = from_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("shapes.txt:2:") && e.contains("head_dim 65"),
            "{e}"
        );
        assert!(e.contains("comment the line out"), "{e}");
    }

    #[test]
    fn a_shape_given_twice_is_searched_once() {
        let p: Problem = "1,8,512,512,64,f16".parse().unwrap();
        let q: Problem = "1,8,512,512,64,bf16".parse().unwrap();
        let (kept, dropped) = dedup(vec![p, q, p]);
        assert_eq!(kept, [p, q]);
        assert_eq!(dropped, [p]);
    }
}
