//! The GPU evaluator's side of a steady-state search, on stand-in workers: candidates
//! submitted one at a time and answered as each GPU finishes.

use super::*;

/// Each submitted candidate compiles and goes to the first free GPU; every one is
/// answered once, by both GPUs between them; once none is waiting the runners are back
/// in the pool, with their time, and no CUBIN is left behind.
#[test]
fn submitted_candidates_are_answered_as_each_gpu_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let json = serde_json::to_string(&answer()).unwrap();
    let script = format!("while read line; do sleep 0.1; echo '{json}'; done");
    let (runner, device, target) = RunnerPool::start(
        &stand_in(dir.path(), &script),
        Some(&[0, 1]),
        0,
        Duration::from_secs(20),
    )
    .unwrap();
    let gpus = runner.gpus().len();
    let compiler = BatchCompiler::new(
        plan(dir.path(), None),
        Toolchain::discover().expect("NVRTC (run `just nvrtc`)"),
        device,
        target.unwrap(),
        gpus,
        None,
    );
    let threads = compiler.threads();
    let mut evaluator = GpuEvaluator::new(runner, compiler);
    // One variant per candidate (the objective's): three per GPU and one per thread.
    assert_eq!(evaluator.in_flight(), 2 * (QUEUED_PER_GPU + 1) + threads);
    let batch = named(&["fa2", "v7a", "v6a", "v5"]);
    for g in &batch[..3] {
        evaluator.submit(g).unwrap();
    }
    let mut answers = vec![evaluator.next_answer(&batch[..3]).unwrap()];
    // A candidate submitted while others wait joins them.
    evaluator.submit(&batch[3]).unwrap();
    for _ in 0..3 {
        answers.push(evaluator.next_answer(&batch).unwrap());
    }
    assert!(
        answers.iter().all(|e| e.status == Status::Ok),
        "{answers:?}"
    );
    let on = |g| answers.iter().filter(|e| e.device_index == Some(g)).count();
    assert_eq!(on(0) + on(1), 4);
    assert!(on(0) > 0 && on(1) > 0, "one GPU ran nothing: {answers:?}");
    let usage = evaluator.utilization();
    assert_eq!(usage.len(), 3, "{usage:?}");
    assert!(usage[0].starts_with("GPU 0: worker busy"), "{usage:?}");
    // The supply side: the four candidates' one variant each, all compiled by NVRTC.
    assert!(
        usage[2].starts_with("compiles: 4 variants (0 failed) took NVRTC")
            && usage[2].contains(&format!("of {threads} compile threads")),
        "{usage:?}"
    );
    assert!(evaluator
        .next_answer(&batch)
        .unwrap_err()
        .to_string()
        .contains("nothing submitted"));
    assert_eq!(cubins_in(dir.path()), 0, "CUBINs left behind");
}

/// The end of a two-GPU steady-state search: one lane waits for a candidate holding the
/// shared queue, the other has a new best's confirmation pending, and the search sends
/// no candidate until that confirmation is answered. The pending lane must get past the
/// queue instead of waiting for the other lane to let go of it.
#[test]
fn a_lane_with_a_confirmation_pending_never_waits_behind_a_lane_waiting_for_candidates() {
    use crate::lane::next_candidate;
    use std::sync::mpsc::RecvTimeoutError;
    use std::sync::Mutex;

    let (send, receive) = mpsc::channel::<u32>();
    let source = Arc::new(Mutex::new(receive));
    let waiting = {
        let source = source.clone();
        std::thread::spawn(move || next_candidate(&source, false))
    };
    // Until the waiting lane holds the queue.
    while source.try_lock().is_ok() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (answered, answer) = mpsc::channel();
    {
        let source = source.clone();
        std::thread::spawn(move || answered.send(next_candidate(&source, true)));
    }
    assert_eq!(
        answer.recv_timeout(Duration::from_secs(10)),
        Ok(Err(RecvTimeoutError::Timeout)),
        "the lane with a confirmation pending waited behind the other"
    );
    send.send(7).unwrap();
    assert_eq!(waiting.join().unwrap(), Ok(7));
    // A free queue: the pending lane takes what is there.
    send.send(8).unwrap();
    assert_eq!(next_candidate(&source, true), Ok(8));
    drop(send);
    assert_eq!(
        next_candidate(&source, false),
        Err(RecvTimeoutError::Disconnected)
    );
}
