//! The ptxas resource report (`--ptxas-options=-v`), parsed from the NVRTC program log.
//!
//! ptxas writes, per entry function:
//! ```text
//! ptxas info    : Compiling entry function 'evo_attention_fwd' for 'sm_90'
//! ptxas info    : Function properties for evo_attention_fwd
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 168 registers, used 1 barriers, 33280 bytes smem, 400 bytes cmem[0]
//! ```
//! Only entry functions are reported; `Function properties` blocks of
//! non-inlined device functions are skipped. Unknown fields are ignored so a
//! new ptxas release that adds one does not break the parse.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Resources of one kernel entry, as ptxas reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub barriers: u32,
    /// Bytes of local memory written by register spills.
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub stack_frame: u32,
    /// Statically declared shared memory (dynamic shared memory is not in the report).
    pub smem_static: u32,
    /// Constant memory per bank: bank -> bytes (bank 0 holds the kernel parameters).
    pub cmem: BTreeMap<u32, u32>,
}

/// The entries of one compile, in the order ptxas compiled them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxasReport {
    pub kernels: Vec<KernelResources>,
}

impl PtxasReport {
    /// Parses the program log; entries without a report line are absent.
    pub fn parse(log: &str) -> PtxasReport {
        let mut kernels: Vec<KernelResources> = Vec::new();
        // The entry ptxas is compiling, and whether the next stack/spill line is its own.
        let mut current: Option<usize> = None;
        let mut properties_of_current = false;
        for line in log.lines() {
            // `ptxas info    : Used ...` and the continuation `ptxas         .     0 bytes ...`
            let text = line.trim();
            let text = text.strip_prefix("ptxas").unwrap_or(text).trim_start();
            let text = text.strip_prefix("info").unwrap_or(text).trim_start();
            let text = text.trim_start_matches([':', '.']).trim();
            if let Some(rest) = text.strip_prefix("Compiling entry function") {
                let name = rest.trim().split('\'').nth(1).unwrap_or("").to_string();
                kernels.push(KernelResources {
                    name,
                    ..KernelResources::default()
                });
                current = Some(kernels.len() - 1);
                properties_of_current = false;
            } else if let Some(rest) = text.strip_prefix("Function properties for") {
                let name = rest.trim();
                properties_of_current = current.is_some_and(|i| kernels[i].name == name);
            } else if text.contains("bytes stack frame") {
                if let (true, Some(i)) = (properties_of_current, current) {
                    let k = &mut kernels[i];
                    for field in text.split(',') {
                        let field = field.trim();
                        if let Some(n) = number_before(field, "bytes stack frame") {
                            k.stack_frame = n;
                        } else if let Some(n) = number_before(field, "bytes spill stores") {
                            k.spill_stores = n;
                        } else if let Some(n) = number_before(field, "bytes spill loads") {
                            k.spill_loads = n;
                        }
                    }
                }
                properties_of_current = false;
            } else if let Some(rest) = text.strip_prefix("Used") {
                let Some(i) = current else { continue };
                let k = &mut kernels[i];
                for field in rest.split(',') {
                    let field = field.trim();
                    if let Some(n) = number_before(field, "registers") {
                        k.registers = n;
                    } else if let Some(n) = number_before(field, "barriers") {
                        k.barriers = n;
                    } else if let Some(n) = number_before(field, "bytes smem") {
                        k.smem_static = n;
                    } else if let Some((amount, bank)) = field.split_once("bytes cmem[") {
                        let bank = bank.strip_suffix(']').and_then(|b| b.parse().ok());
                        if let (Some(bank), Some(n)) = (bank, last_number(amount)) {
                            k.cmem.insert(bank, n);
                        }
                    }
                }
            }
        }
        PtxasReport { kernels }
    }

    /// The entry named `name`, if ptxas reported it.
    pub fn kernel(&self, name: &str) -> Option<&KernelResources> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

/// The resource table of `evo compile --emit report` and the snapshots: a header line,
/// then one line per kernel entry.
impl std::fmt::Display for PtxasReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<22} {:>9} {:>12} {:>11} {:>11} {:>11} {:>8}",
            "entry",
            "registers",
            "spill_stores",
            "spill_loads",
            "stack_frame",
            "smem_static",
            "barriers"
        )?;
        for k in &self.kernels {
            writeln!(
                f,
                "{:<22} {:>9} {:>12} {:>11} {:>11} {:>11} {:>8}",
                k.name,
                k.registers,
                k.spill_stores,
                k.spill_loads,
                k.stack_frame,
                k.smem_static,
                k.barriers
            )?;
        }
        Ok(())
    }
}

/// `N` in a field `... N <unit>` (`Used 168 registers`, `used 1 barriers`, `0 bytes smem`).
fn number_before(field: &str, unit: &str) -> Option<u32> {
    last_number(field.strip_suffix(unit)?)
}

fn last_number(text: &str) -> Option<u32> {
    text.split_whitespace().next_back()?.parse().ok()
}
