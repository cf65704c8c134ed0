//! The one layer that calls NVRTC: a program handle with RAII, compile, log, PTX, CUBIN.
//!
//! cudarc's `result` module has no CUBIN getter and its safe `compile_ptx` drops the
//! log of a successful compile, which is where ptxas writes its resource report;
//! so this module goes one level down and keeps all unsafe code in one place.

use crate::{CodegenError, CompileOptions, Compiled, Defines, PtxasReport, Toolchain};
use cudarc::nvrtc::{result, sys};
use std::ffi::{c_char, CString};
use std::time::Instant;

/// An NVRTC program, destroyed on drop.
struct Program {
    handle: sys::nvrtcProgram,
    name: String,
    // NVRTC may keep pointers into the source and name until destruction.
    _source: CString,
    _c_name: CString,
}

impl Program {
    fn new(name: &str, source: &str) -> Result<Program, CodegenError> {
        let nul = |what| CodegenError::NulByte {
            name: name.to_string(),
            what,
        };
        let c_source = CString::new(source).map_err(|_| nul("source"))?;
        let c_name = CString::new(name).map_err(|_| nul("program name"))?;
        let handle = result::create_program(&c_source, Some(&c_name)).map_err(|error| {
            CodegenError::Nvrtc {
                name: name.to_string(),
                call: "nvrtcCreateProgram",
                error,
            }
        })?;
        Ok(Program {
            handle,
            name: name.to_string(),
            _source: c_source,
            _c_name: c_name,
        })
    }

    fn err(&self, call: &'static str) -> impl Fn(result::NvrtcError) -> CodegenError + '_ {
        move |error| CodegenError::Nvrtc {
            name: self.name.clone(),
            call,
            error,
        }
    }

    /// Compiles; `Ok(false)` when NVRTC reports a compilation error (see the log).
    fn compile(&self, options: &[String]) -> Result<bool, CodegenError> {
        for option in options {
            if option.contains('\0') {
                return Err(CodegenError::NulByte {
                    name: self.name.clone(),
                    what: "compile options",
                });
            }
        }
        // SAFETY: `handle` came from `create_program` and is destroyed only in Drop;
        // the options were checked for NUL bytes (cudarc unwraps CString::new).
        match unsafe { result::compile_program(self.handle, options) } {
            Ok(()) => Ok(true),
            Err(result::NvrtcError(sys::nvrtcResult::NVRTC_ERROR_COMPILATION)) => Ok(false),
            Err(e) => Err(self.err("nvrtcCompileProgram")(e)),
        }
    }

    fn log(&self) -> Result<String, CodegenError> {
        // SAFETY: live handle (see `compile`).
        let raw = unsafe { result::get_program_log(self.handle) }
            .map_err(self.err("nvrtcGetProgramLog"))?;
        Ok(c_chars_to_string(&raw))
    }

    fn ptx(&self) -> Result<String, CodegenError> {
        // SAFETY: live handle, compiled successfully.
        let raw = unsafe { result::get_ptx(self.handle) }.map_err(self.err("nvrtcGetPTX"))?;
        Ok(c_chars_to_string(&raw))
    }

    fn cubin(&self) -> Result<Vec<u8>, CodegenError> {
        let mut size = 0usize;
        // SAFETY: live handle, compiled successfully for a real architecture;
        // `size` is a live local.
        unsafe { sys::nvrtcGetCUBINSize(self.handle, &mut size) }
            .result()
            .map_err(self.err("nvrtcGetCUBINSize"))?;
        let mut cubin = vec![0u8; size];
        // SAFETY: the buffer holds exactly the `size` bytes NVRTC asked for.
        unsafe { sys::nvrtcGetCUBIN(self.handle, cubin.as_mut_ptr().cast::<c_char>()) }
            .result()
            .map_err(self.err("nvrtcGetCUBIN"))?;
        Ok(cubin)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed exactly once, here. A failure to
        // free cannot be acted on in drop, so it is ignored.
        let _ = unsafe { result::destroy_program(self.handle) };
    }
}

/// NVRTC strings are NUL-terminated `char` buffers.
fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles CUDA source under the kernel ABI (`kernels/ABI.md`) with NVRTC.
///
/// The toolchain's include directory is appended to `opts.include_dirs` when
/// absent, and `defines` come last; [`Compiled::options`] records the full list.
/// `name` labels the program in NVRTC's messages (e.g. `v7a.cu`).
pub fn compile_source(
    tc: &Toolchain,
    name: &str,
    source: &str,
    defines: &Defines,
    opts: &CompileOptions,
) -> Result<Compiled, CodegenError> {
    let mut opts = opts.clone();
    if !opts.include_dirs.contains(&tc.include_dir) {
        opts.include_dirs.push(tc.include_dir.clone());
    }
    let mut options = opts.build();
    options.extend(defines.flags());

    let start = Instant::now();
    let program = Program::new(name, source)?;
    let ok = program.compile(&options)?;
    let log = program.log()?;
    if !ok {
        return Err(CodegenError::Compile {
            name: name.to_string(),
            log,
            options,
        });
    }
    let ptx = program.ptx()?;
    let cubin = program.cubin()?;
    let seconds = start.elapsed().as_secs_f64();
    let report = PtxasReport::parse(&log);
    Ok(Compiled {
        name: name.to_string(),
        ptx,
        cubin,
        log,
        options,
        report,
        seconds,
    })
}
