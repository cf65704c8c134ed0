//! The batch compiler: its CUBIN cache (what a repeated search does not compile again) and
//! its default compile threads.

use super::*;

/// A repeated search compiles nothing twice: the second compile of a genome takes its
/// variants from the cache, and the worker gets the same CUBIN.
#[test]
fn a_repeated_compile_takes_its_cubins_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    let toolchain = Toolchain::discover().expect("NVRTC (run `just nvrtc`)");
    let cache = Arc::new(CubinCache::open(&cache_dir, &toolchain).unwrap());
    let compiler = BatchCompiler::new(
        plan(dir.path(), Some(&cache_dir)),
        toolchain,
        "stand-in GPU".into(),
        Target::Sm90,
        1,
        Some(cache.clone()),
    );
    let fa2 = named(&["fa2"])[0];
    let cubin = |p: Prepared| match p {
        Prepared::Run(request) => std::fs::read(&request.variants[0].cubin).unwrap(),
        Prepared::Done(e) => panic!("fa2 did not compile: {}", e.detail),
    };
    let first = cubin(compiler.compile_one(&fa2));
    assert!(cache
        .line()
        .ends_with("0 variants taken from it, 1 compiled into it"));
    let second = cubin(compiler.compile_one(&fa2));
    assert!(
        cache
            .line()
            .ends_with("1 variants taken from it, 1 compiled into it"),
        "{}",
        cache.line()
    );
    assert_eq!(first, second);
}

#[test]
fn several_gpus_leave_half_the_cores_to_their_workers() {
    use crate::compiler::default_compile_threads;
    // One GPU: every core but one compiles.
    assert_eq!(default_compile_threads(32, 1), 31);
    assert_eq!(default_compile_threads(16, 0), 15);
    // Two GPUs on 32 logical cores: 15 (run S4), not the 30 that slowed the workers.
    assert_eq!(default_compile_threads(32, 2), 15);
    assert_eq!(default_compile_threads(64, 4), 31);
    // Never none.
    assert_eq!(default_compile_threads(1, 1), 1);
    assert_eq!(default_compile_threads(2, 2), 1);
}
