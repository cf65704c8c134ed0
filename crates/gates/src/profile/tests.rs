use super::*;

const H100_FA3: &str = include_str!("../../tests/fixtures/ncu_h100_fa3.csv");
const H100_FA2: &str = include_str!("../../tests/fixtures/ncu_h100_fa2.csv");

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
    let recorded = include_bytes!("../../tests/fixtures/ncu_h100_query_tensor.txt");
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
