//! How the gates time: graphs whose kernel launches are re-pointed before every replay,
//! and event timing. One call's arguments and its launch are the runtime's
//! (`evo_runtime::launch`).
//!
//! FAST pairs input and output slots anew every repeat (`crate::fast`), so a captured
//! graph cannot keep the pointers it was captured with: [`LaunchGraph`] walks the
//! captured chain once for its kernel nodes, and before each replay hands every node
//! the repeat's arguments (`cuGraphExecKernelNodeSetParams`, a parameter copy per node,
//! no re-instantiation).

use super::driver;
use super::verifier::Verifier;
use crate::error::GateError;
use cudarc::driver::sys as cu;
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaFunction, CudaGraph, CudaSlice, CudaStream, LaunchConfig};
use evo_runtime::Args;
use std::ffi::c_void;
use std::sync::Arc;

/// A captured chain of kernel launches whose arguments can be replaced before a replay.
pub(crate) struct LaunchGraph {
    graph: CudaGraph,
    /// The kernel nodes in launch order.
    nodes: Vec<cu::CUgraphNode>,
}

impl LaunchGraph {
    /// Captures `calls` calls of `launch` and finds the graph's kernel nodes (the
    /// launches must form one chain of kernel nodes).
    pub fn capture<F: FnMut(usize) -> Result<(), GateError>>(
        stream: &Arc<CudaStream>,
        calls: usize,
        launch: F,
    ) -> Result<LaunchGraph, GateError> {
        let graph = capture(stream, calls, launch)?;
        let nodes = chain(&graph)?;
        Ok(LaunchGraph { graph, nodes })
    }

    /// Kernel nodes in the graph.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Gives kernel node `index` new arguments (same function and shape as captured).
    pub fn set(
        &self,
        index: usize,
        f: &CudaFunction,
        cfg: LaunchConfig,
        args: &mut dyn Args,
    ) -> Result<(), GateError> {
        let node = *self.nodes.get(index).ok_or_else(|| {
            GateError::Abi(format!(
                "the graph has {} kernel nodes, not {}",
                self.nodes.len(),
                index + 1
            ))
        })?;
        self.set_node(node, f, cfg, &mut args.params())
    }

    fn set_node(
        &self,
        node: cu::CUgraphNode,
        f: &CudaFunction,
        cfg: LaunchConfig,
        params: &mut [*mut c_void],
    ) -> Result<(), GateError> {
        let node_params = cu::CUDA_KERNEL_NODE_PARAMS_v2 {
            func: f.cu_function(),
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            kernelParams: params.as_mut_ptr(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        };
        // SAFETY: `node` is a kernel node of the graph `self.graph` was instantiated
        // from (found by `chain`), the function is the one captured there, and every
        // pointer of `params` points to an argument value alive until this call returns
        // (the driver copies the values).
        unsafe {
            cu::cuGraphExecKernelNodeSetParams_v2(self.graph.cu_graph_exec(), node, &node_params)
        }
        .result()
        .map_err(driver("re-pointing a graph launch"))
    }

    pub fn launch(&self) -> Result<(), GateError> {
        self.graph.launch().map_err(driver("replaying the graph"))
    }
}

/// Captures `calls` calls of `launch` into an uploaded graph (a capture is always
/// ended, also when a call fails inside it, so the stream is usable afterwards).
pub(crate) fn capture<F: FnMut(usize) -> Result<(), GateError>>(
    stream: &Arc<CudaStream>,
    calls: usize,
    mut launch: F,
) -> Result<CudaGraph, GateError> {
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .map_err(driver("beginning a graph capture"))?;
    let mut result = Ok(());
    for call in 0..calls {
        result = launch(call);
        if result.is_err() {
            break;
        }
    }
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    result?;
    let graph = graph
        .map_err(driver("ending the graph capture"))?
        .ok_or_else(|| GateError::Driver {
            during: "ending the graph capture".into(),
            message: "the capture produced no graph".into(),
        })?;
    graph.upload().map_err(driver("uploading the graph"))?;
    Ok(graph)
}

/// The kernel nodes of a captured chain, from its one root along its one path.
fn chain(graph: &CudaGraph) -> Result<Vec<cu::CUgraphNode>, GateError> {
    let not_a_chain = |what: String| GateError::Driver {
        during: "walking the captured graph".into(),
        message: what,
    };
    let mut n = 0usize;
    // SAFETY: a null array asks only for the count.
    unsafe { cu::cuGraphGetRootNodes(graph.cu_graph(), std::ptr::null_mut(), &mut n) }
        .result()
        .map_err(driver("counting the graph's roots"))?;
    if n != 1 {
        return Err(not_a_chain(format!("{n} root nodes, not one")));
    }
    let mut node: cu::CUgraphNode = std::ptr::null_mut();
    // SAFETY: room for the one root counted above.
    unsafe { cu::cuGraphGetRootNodes(graph.cu_graph(), &mut node, &mut n) }
        .result()
        .map_err(driver("reading the graph's root"))?;
    let mut nodes = Vec::new();
    loop {
        let mut kind = cu::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        // SAFETY: `node` is a node of the graph.
        unsafe { cu::cuGraphNodeGetType(node, &mut kind) }
            .result()
            .map_err(driver("reading a graph node's type"))?;
        if kind != cu::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
            return Err(not_a_chain(format!("a {kind:?} node among the launches")));
        }
        nodes.push(node);
        let mut deps = 0usize;
        // SAFETY: null arrays ask only for the count (edge data is not wanted).
        unsafe {
            cu::cuGraphNodeGetDependentNodes_v2(
                node,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut deps,
            )
        }
        .result()
        .map_err(driver("counting a node's dependents"))?;
        match deps {
            0 => return Ok(nodes),
            1 => {
                let mut next: cu::CUgraphNode = std::ptr::null_mut();
                // SAFETY: room for the one dependent counted above; no edge data.
                unsafe {
                    cu::cuGraphNodeGetDependentNodes_v2(
                        node,
                        &mut next,
                        std::ptr::null_mut(),
                        &mut deps,
                    )
                }
                .result()
                .map_err(driver("reading a node's dependent"))?;
                node = next;
            }
            d => return Err(not_a_chain(format!("a node with {d} dependents"))),
        }
    }
}

/// What empties L2 before a timing: a buffer twice the L2's size, read over by the
/// verifier's `evo_read_over`, so that nothing a timed launch reads is still in L2 when
/// it starts (its inputs were drawn just before) and L2 holds no dirty line either.
/// It is read, not written: a memset of it would leave L2 full of dirty lines, and their
/// write-back (up to the L2's 50 MB on an H100) would land in the timed launches, which a
/// library timed back to back never pays: run D4 of experiments/2026-11-25-h100-decode-2
/// found it 9.7 µs of a grouped decode launch (188.4 against 178.7 µs, the same kernel)
/// and 9.9 µs of cuDNN's on the same row (188.6 against 178.7 µs).
pub(crate) struct L2Flush {
    buf: CudaSlice<u8>,
    sink: CudaSlice<u32>,
}

impl L2Flush {
    pub fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>) -> Result<L2Flush, GateError> {
        let l2 = ctx
            .attribute(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(driver("reading the L2 size"))?;
        let bytes = 2 * (l2.max(1 << 20) as usize);
        Ok(L2Flush {
            buf: stream
                .alloc_zeros::<u8>(bytes)
                .map_err(driver(format!("allocating {bytes} bytes to flush L2")))?,
            sink: stream
                .alloc_zeros::<u32>(1)
                .map_err(driver("allocating the L2 flush's sink"))?,
        })
    }

    /// Reads the kernel's `kept` buffer (made the first time) over L2 on the verifier's
    /// stream, the device's one: what was drawn just before is no longer cached when
    /// the timed launches start, and nothing waits to be written back.
    pub fn flush(
        kept: &mut Option<L2Flush>,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        verifier: Option<&Verifier>,
    ) -> Result<(), GateError> {
        let verifier = verifier.ok_or_else(|| {
            GateError::Reference(
                "timing needs the gates' verifier (its read pass empties L2); install it \
                 before loading the kernel"
                    .into(),
            )
        })?;
        if kept.is_none() {
            *kept = Some(L2Flush::new(ctx, stream)?);
        }
        let flush = kept.as_mut().expect("made above");
        verifier.read_over(&flush.buf, &mut flush.sink)
    }

    /// Each of `n` launches alone between two events, after the flush; the sum of
    /// their times (ms). The buffer is the kernel's `kept` one, made the first time.
    pub fn time_each<F: FnMut(usize) -> Result<(), GateError>>(
        kept: &mut Option<L2Flush>,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        verifier: Option<&Verifier>,
        n: usize,
        mut launch: F,
    ) -> Result<f64, GateError> {
        let mut total = 0.0;
        for i in 0..n {
            L2Flush::flush(kept, ctx, stream, verifier)?;
            total += timed(ctx, stream, || launch(i))?;
        }
        Ok(total)
    }
}

/// Events with timing enabled: cudarc's `new_event(None)` creates them with
/// `CU_EVENT_DISABLE_TIMING`, whose elapsed time is an error.
pub(crate) fn timed<F: FnMut() -> Result<(), GateError>>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    mut body: F,
) -> Result<f64, GateError> {
    let start = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver("creating a timing event"))?;
    let end = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver("creating a timing event"))?;
    start
        .record(stream)
        .map_err(driver("recording the start event"))?;
    body()?;
    end.record(stream)
        .map_err(driver("recording the end event"))?;
    let ms = start
        .elapsed_ms(&end)
        .map_err(driver("waiting for the timed calls"))?;
    Ok(ms as f64)
}
