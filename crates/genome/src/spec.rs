//! The problem spec, `B,H,Lq,Lk,D,dtype[,options]`: how `--problem`, the suites and the
//! dispatch table write a [`Problem`].
//!
//! The parser is strict. A spec is typed by hand and copied between files, and one that
//! could be read two ways (two dtypes, `causal` twice, an empty field left by a stray
//! comma) would run a problem nobody asked for. Every number is bounded by what the
//! kernels index: batch, heads and lengths are 32-bit ints in the kernels' arguments
//! (kernels/ABI.md), and an error says the range instead of calling a large number
//! "not a number".

use crate::problem::{Dtype, HeadDim, MaskAlign, Problem, MAX_DIM};

/// The problem syntax of `--problem`, the suites and the dispatch table.
pub const SPEC_FORM: &str = "B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]\
     [,align=br], e.g. 1,8,512,512,64,f16 or 1,32,4096,4096,128,bf16,causal,kv=8,window=4096:; \
     kv=N: K/V heads (grouped-query attention), causal=br: the diagonal at the bottom right \
     (query i sees keys j <= i + Lk - Lq), window=LEFT:RIGHT: keys at most LEFT before and \
     RIGHT after the diagonal (a side left empty is unbounded), align=br: a window's \
     diagonal at the bottom right without the causal mask";

/// The six leading fields, as the errors name them.
const FIELDS: [&str; 6] = ["B", "H", "Lq", "Lk", "D", "dtype"];

/// Parses [`SPEC_FORM`], e.g. `1,8,512,512,64,f16` or `1,32,4096,4096,128,f16,causal,kv=8`.
/// Every error starts with the spec, quoted.
impl std::str::FromStr for Problem {
    type Err = String;

    fn from_str(s: &str) -> Result<Problem, String> {
        parse(s).map_err(|e| format!("`{s}`: {e}"))
    }
}

fn parse(s: &str) -> Result<Problem, String> {
    if s.trim().is_empty() {
        return Err(format!("the spec is empty; expected {SPEC_FORM}"));
    }
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if let Some(i) = parts.iter().position(|p| p.is_empty()) {
        let what = match FIELDS.get(i) {
            Some(field) => format!("field {} ({field})", i + 1),
            None => format!("option {}", i + 1 - FIELDS.len()),
        };
        return Err(format!(
            "{what} is empty (two commas in a row, or one at an end); expected {SPEC_FORM}"
        ));
    }
    if parts.len() < FIELDS.len() {
        return Err(format!(
            "{} fields where at least 6 are needed; expected {SPEC_FORM}",
            parts.len()
        ));
    }
    let dtype =
        dtype_named(parts[5]).ok_or_else(|| format!("dtype `{}` is not f16 or bf16", parts[5]))?;
    let mut problem = Problem {
        batch: dimension(parts[0], "B")?,
        heads: dimension(parts[1], "H")?,
        q_len: dimension(parts[2], "Lq")?,
        kv_len: dimension(parts[3], "Lk")?,
        head_dim: head_dim(parts[4])?,
        dtype,
        ..Problem::seed()
    };
    // Each option once: the alignment may come from `causal=` or `align=`, not both.
    let mut seen: Vec<&str> = Vec::new();
    let mut once = |what: &'static str, option: &str| {
        if seen.contains(&what) {
            return Err(format!(
                "`{option}` gives the {what} a second time; give it once"
            ));
        }
        seen.push(what);
        Ok(())
    };
    for &option in &parts[FIELDS.len()..] {
        let (key, value) = match option.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (option, None),
        };
        if value == Some("") {
            return Err(format!(
                "option `{option}` has no value after `=`; expected {SPEC_FORM}"
            ));
        }
        match key {
            "causal" => {
                once("causal mask", option)?;
                problem.causal = true;
                if let Some(v) = value {
                    once("alignment", option)?;
                    problem.align = align(v)?;
                }
            }
            "align" => {
                once("alignment", option)?;
                problem.align = align(value.unwrap_or(""))?;
            }
            "kv" | "kv_heads" => {
                once("K/V heads", option)?;
                let v = value.unwrap_or("");
                if !is_digits(v) {
                    return Err(format!("kv `{v}` is not a number of K/V heads; write kv=8"));
                }
                // `validate` says why 0 is no K/V head count (it divides nothing).
                let zero = v.bytes().all(|b| b == b'0');
                problem.kv_heads = Some(if zero { 0 } else { bounded(v, "kv", 1)? });
            }
            "window" => {
                once("window", option)?;
                let v = value.unwrap_or("");
                let (left, right) = v.split_once(':').ok_or_else(|| {
                    format!(
                        "window `{v}` is not LEFT:RIGHT; write window=4096: for a left window \
                         of 4096 keys"
                    )
                })?;
                problem.window_left = window_side(left.trim(), "left")?;
                problem.window_right = window_side(right.trim(), "right")?;
                if problem.window_left.is_none() && problem.window_right.is_none() {
                    return Err(
                        "window `:` bounds neither side; leave the option out for no window, \
                         or write window=LEFT: or window=:RIGHT"
                            .into(),
                    );
                }
            }
            other if dtype_named(other).is_some() => {
                return Err(format!(
                    "a second dtype `{other}` after `{}`; give one dtype, in field 6",
                    parts[5]
                ))
            }
            other => return Err(format!("`{other}` is not an option; expected {SPEC_FORM}")),
        }
    }
    if problem.kv_heads == Some(problem.heads) {
        problem.kv_heads = None;
    }
    problem.validate().map(|()| problem)
}

fn dtype_named(text: &str) -> Option<Dtype> {
    Dtype::ALL.into_iter().find(|d| d.label() == text)
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A batch, head count or length: digits, 1 to [`MAX_DIM`].
fn dimension(text: &str, name: &str) -> Result<u32, String> {
    if !is_digits(text) {
        return Err(format!(
            "{name} `{text}` is not a number; expected {SPEC_FORM}"
        ));
    }
    bounded(text, name, 1)
}

/// Digits within `low..=MAX_DIM`, or an error that gives the range and why.
fn bounded(digits: &str, name: &str, low: u32) -> Result<u32, String> {
    match digits.parse::<u64>() {
        Ok(v) if (u64::from(low)..=u64::from(MAX_DIM)).contains(&v) => Ok(v as u32),
        _ => Err(format!(
            "{name} {digits} is out of range: it must be {low} to {MAX_DIM} (kernels take it \
             as a 32-bit int)"
        )),
    }
}

fn head_dim(text: &str) -> Result<HeadDim, String> {
    if !is_digits(text) {
        return Err(format!("D `{text}` is not a number; expected {SPEC_FORM}"));
    }
    match text.parse::<u32>() {
        Ok(d) => HeadDim::try_from(d),
        Err(_) => Err(format!(
            "head_dim {text} is not supported; use 64, 96, 128 or 256"
        )),
    }
}

fn align(value: &str) -> Result<MaskAlign, String> {
    match value {
        "br" | "bottom-right" | "bottom_right" => Ok(MaskAlign::BottomRight),
        "tl" | "top-left" | "top_left" => Ok(MaskAlign::TopLeft),
        other => Err(format!(
            "alignment `{other}` is not `br` (bottom-right) or `tl` (top-left)"
        )),
    }
}

/// One side of a window: empty for no bound, else 0 to [`MAX_DIM`] keys.
fn window_side(text: &str, side: &str) -> Result<Option<u32>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    if let Some(rest) = text.strip_prefix('-').filter(|r| is_digits(r)) {
        return Err(format!(
            "window {side} -{rest} is negative; write a width of 0 or more keys, or leave \
             the side empty for no bound"
        ));
    }
    if !is_digits(text) {
        return Err(format!("window {side} `{text}` is not a number"));
    }
    bounded(text, &format!("window {side}"), 0).map(Some)
}

#[cfg(test)]
mod tests {
    use crate::Problem;

    #[test]
    fn a_spec_that_reads_two_ways_or_leaves_a_field_empty_is_refused() {
        for (bad, says) in [
            ("", "the spec is empty"),
            (
                "1,8,512,512,64,f16,causal,causal",
                "gives the causal mask a second time",
            ),
            (
                "1,8,512,512,64,f16,bf16",
                "a second dtype `bf16` after `f16`",
            ),
            (
                "1,8,512,512,64,f16,kv=2,kv=4",
                "gives the K/V heads a second time",
            ),
            (
                "1,8,512,512,64,f16,window=4:,window=:4",
                "gives the window a second time",
            ),
            (
                "1,8,512,512,64,f16,causal=br,align=br",
                "gives the alignment a second time",
            ),
            ("2,,8,512,512,64,f16", "field 2 (H) is empty"),
            ("1,8,512,512,64,f16,", "option 1 is empty"),
            (",1,8,512,512,64,f16", "field 1 (B) is empty"),
            (
                "1,8,512,512,64,f16,causal=",
                "option `causal=` has no value",
            ),
            ("1,8,512,512,64,f16,kv=", "option `kv=` has no value"),
            ("1,8,512,512,64,f16,window=:", "bounds neither side"),
            ("1,8,512,512,64", "5 fields where at least 6"),
            ("+1,8,512,512,64,f16", "B `+1` is not a number"),
        ] {
            let err = bad.parse::<Problem>().unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(err.starts_with(&format!("`{bad}`: ")), "{bad:?}: {err}");
        }
    }

    #[test]
    fn numbers_beyond_what_the_kernels_index_say_the_range() {
        for (bad, says) in [
            (
                "4294967296,8,512,512,64,f16",
                "B 4294967296 is out of range: it must be 1 to 2147483647",
            ),
            (
                "1,8,2147483648,512,64,f16",
                "Lq 2147483648 is out of range: it must be 1 to 2147483647",
            ),
            (
                "1,8,512,99999999999999999999999,64,f16",
                "Lk 99999999999999999999999 is out of range",
            ),
            ("0,8,512,512,64,f16", "B 0 is out of range: it must be 1 to"),
            (
                "1,8,512,512,4294967360,f16",
                "head_dim 4294967360 is not supported",
            ),
            (
                "1,8,512,512,64,f16,kv=4294967296",
                "kv 4294967296 is out of range: it must be 1 to",
            ),
            (
                "1,8,512,512,64,f16,window=2147483648:",
                "window left 2147483648 is out of range: it must be 0 to 2147483647",
            ),
            // A packing kernel's launch has group·Lq rows, an int.
            (
                "1,64,67108864,512,64,f16,kv=1",
                "`heads`/`kv_heads`·`q_len` (64·67108864) exceed 2147483647",
            ),
        ] {
            let err = bad.parse::<Problem>().unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(!err.contains("not a number"), "{bad:?}: {err}");
        }
        // The largest lengths the kernels index still parse.
        let p: Problem = "1,1,2147483647,2147483647,64,f16,window=2147483647:0"
            .parse()
            .unwrap();
        assert_eq!((p.q_len, p.window_left), (2147483647, Some(2147483647)));
        // Spaces around fields and options stay allowed; the spec prints without them.
        let q: Problem = " 1, 8 ,512,512,64,f16, causal = br ".parse().unwrap();
        assert_eq!(q.spec(), "1,8,512,512,64,f16,causal=br");
    }
}
