//! A champions folder that is damaged, old, or already holds a champion: `evo dispatch`
//! and `evo export` refuse a table that points out of its folder, at another class's
//! champion or at a genome its figures are not of; an old table prints what it knows;
//! `evo champions --out` keeps the faster champion and what it did not write (CPU).

use crate::util::{evo, repo_root, stderr, stdout};
use evo_genome::dispatch::{DispatchTable, DISPATCH_FILE};
use evo_genome::GenomeFile;
use evo_lineage::Lineage;

/// The search of `b1-h8-l512-d64`: its champion is 3614c1b7608d779e (6.39 µs), and it
/// timed 94db5fe4c97674c7 at 6.41 µs.
const SEARCH_NC: &str = "experiments/2026-11-25-h100-cluster-combine/s2/search-nc";
/// Another shape's search, which timed neither of those genomes.
const SEARCH_L1024: &str = "experiments/2026-11-25-h100-o-direct/s1/search-l1024";

/// A champions folder written by `evo champions SEARCH_NC`: one class, its champion file.
fn one_class_folder() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("champions");
    let o = evo(
        &["champions", SEARCH_NC, "--out", &out.display().to_string()],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    (dir, out)
}

fn dispatch_in(dir: &std::path::Path) -> std::process::Output {
    evo(
        &[
            "dispatch",
            "1,8,512,512,64,f16",
            "--champions",
            &dir.display().to_string(),
        ],
        &[],
    )
}

/// A class pointing out of its folder, at another class's champion, at a genome its
/// figures were not measured on, with a figure that is not a time; an empty table; a
/// damaged one: each refused on load with the file, the class and the field.
#[test]
fn the_table_is_checked_on_load() {
    let (_dir, out) = one_class_folder();
    let path = out.join(DISPATCH_FILE);
    let good = DispatchTable::load(&path).unwrap();
    let o = dispatch_in(&out);
    assert!(o.status.success(), "{}", stderr(&o));
    let write = |t: &DispatchTable| std::fs::write(&path, t.to_toml_string("test")).unwrap();
    let refused = |want: &[&str]| {
        let o = dispatch_in(&out);
        let e = stderr(&o);
        assert!(!o.status.success(), "{want:?}: {}", stdout(&o));
        assert!(
            !e.contains("panicked") && !e.contains("no dispatch table at"),
            "{e}"
        );
        for w in want {
            assert!(e.contains(w), "{w}: {e}");
        }
    };
    let with = |f: &dyn Fn(&mut evo_genome::dispatch::ShapeClass)| {
        let mut t = good.clone();
        f(&mut t.classes[0]);
        t
    };

    let outside = out.parent().unwrap().join("outside.toml");
    std::fs::copy(out.join(&good.classes[0].champion), &outside).unwrap();
    write(&with(&|c| c.champion = "../outside.toml".into()));
    refused(&[
        "dispatch.toml: class `b1-h8-l512-d64`: field `champion` is `../outside.toml`",
        "leaves the table's folder",
    ]);
    write(&with(&|c| c.champion = outside.display().to_string()));
    refused(&["field `champion`", "an absolute path"]);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, out.join("link.toml")).unwrap();
        write(&with(&|c| c.champion = "link.toml".into()));
        refused(&["field `champion` is `link.toml`", "outside"]);
    }

    // Another class's champion: its figures would be printed for the wrong kernel.
    let file = GenomeFile::load(&out.join(&good.classes[0].champion)).unwrap();
    std::fs::write(
        out.join("other.toml"),
        GenomeFile {
            name: "champion-b4-h16-l1024-d64".into(),
            ..file.clone()
        }
        .to_toml_string(),
    )
    .unwrap();
    write(&with(&|c| c.champion = "other.toml".into()));
    refused(&[
        "other.toml: its name is `champion-b4-h16-l1024-d64`, not `champion-b1-h8-l512-d64`",
    ]);

    // Figures of another genome.
    write(&with(&|c| {
        c.median_us = Some(6.4);
        c.genome_id = Some("94db5fe4c97674c7".into());
    }));
    refused(&[
        "figures were measured on genome 94db5fe4c97674c7",
        "3614c1b7608d779e",
        "evo bench --champions DIR --record",
    ]);

    write(&with(&|c| c.median_us = Some(f64::NAN)));
    refused(&[
        "class `b1-h8-l512-d64`: field `median_us` is NaN",
        "finite number of µs above 0",
    ]);

    std::fs::write(&path, "device = \"NVIDIA H100 80GB HBM3\"\n").unwrap();
    refused(&["dispatch.toml: no class", "evo champions EXPERIMENT"]);

    // Damaged: the parse error with its line, not "no dispatch table".
    std::fs::write(
        &path,
        good.to_toml_string("test")
            .replace("experiment =", "experiment = ["),
    )
    .unwrap();
    refused(&["dispatch.toml:"]);
    std::fs::write(
        &path,
        good.to_toml_string("test")
            .replace("champion =", "champoin ="),
    )
    .unwrap();
    refused(&["dispatch.toml:", "champoin"]);

    // An export of an empty table is refused, not "exported 0 champions".
    std::fs::write(&path, "device = \"NVIDIA H100 80GB HBM3\"\n").unwrap();
    let export = out.parent().unwrap().join("export");
    let o = evo(
        &[
            "export",
            &export.display().to_string(),
            "--champions",
            &out.display().to_string(),
        ],
        &[],
    );
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(stderr(&o).contains("no class"), "{}", stderr(&o));
    assert!(!stdout(&o).contains("exported 0"), "{}", stdout(&o));
    assert!(!export.exists());
}

/// A table written before the baselines were recorded still loads; its ratio names the
/// one backend it has, and says that a faster one may not be recorded.
#[test]
fn an_old_table_prints_what_it_knows() {
    let (_dir, out) = one_class_folder();
    let path = out.join(DISPATCH_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let old = text.replace(
        "experiment = ",
        "median_us = 6.4\ncudnn_us = 9.6\nspeedup_vs_cudnn = 1.5\nbench = \"b.json (H100, f16)\"\nexperiment = ",
    );
    std::fs::write(&path, old).unwrap();
    let o = dispatch_in(&out);
    assert!(o.status.success(), "{}", stderr(&o));
    let out_text = stdout(&o);
    assert!(
        out_text.contains(
            "6.40 µs against sdpa-cudnn 9.60 µs: 1.50x (the only backend this table records"
        ),
        "{out_text}"
    );
    assert!(out_text.contains("does not say which genome"), "{out_text}");
}

/// `evo champions --out` keeps the faster of the recorded champion and the new one when
/// one search timed both, keeps the recorded one when none did (unless --replace), and
/// does not write over a file it did not write (unless --force).
#[test]
fn champions_keep_the_faster_and_what_they_did_not_write() {
    let (_dir, out) = one_class_folder();
    let path = out.join(DISPATCH_FILE);
    let out_s = out.display().to_string();
    let champion = out.join("b1-h8-l512-d64.toml");
    let lineage = |dir: &str| Lineage::load(&repo_root().join(dir).join("lineage.json")).unwrap();
    let record = |experiment: &str, genome: evo_genome::Genome| {
        let mut t = DispatchTable::load(&path).unwrap();
        t.classes[0].experiment = experiment.into();
        t.classes[0].median_us = Some(5.0);
        t.classes[0].genome_id = Some(genome.id().to_string());
        std::fs::write(&path, t.to_toml_string("test")).unwrap();
        let file = GenomeFile {
            name: "champion-b1-h8-l512-d64".into(),
            description: String::new(),
            genes: genome,
        };
        std::fs::write(&champion, file.to_toml_string()).unwrap();
    };

    // Recorded: a genome only another search timed. Not comparable: kept, said so.
    let other = lineage(SEARCH_L1024).champion().unwrap().genome;
    assert!(lineage(SEARCH_NC).get(&other.id()).is_none());
    record(SEARCH_L1024, other);
    let before = (
        std::fs::read_to_string(&path).unwrap(),
        std::fs::read_to_string(&champion).unwrap(),
    );
    let o = evo(&["champions", SEARCH_NC, "--out", &out_s], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o);
    assert!(
        said.contains("kept the recorded b8d8e79acb4bcd2e")
            && said.contains("no search timed both")
            && said.contains("--replace"),
        "{said}"
    );
    let after = (
        std::fs::read_to_string(&path).unwrap(),
        std::fs::read_to_string(&champion).unwrap(),
    );
    assert_eq!(before, after, "nothing was written");
    let o = evo(&["champions", SEARCH_NC, "--out", &out_s, "--replace"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        GenomeFile::load(&champion).unwrap().genes.id().to_string(),
        "3614c1b7608d779e"
    );

    // Recorded: a slower genome of the same search. The search's champion is faster there.
    let nc = lineage(SEARCH_NC);
    let slower = nc
        .nodes()
        .find(|n| n.id.to_string() == "94db5fe4c97674c7")
        .unwrap()
        .genome;
    record(SEARCH_NC, slower);
    let o = evo(&["champions", SEARCH_NC, "--out", &out_s], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("against the recorded 94db5fe4c97674c7's 6.41 µs, both timed by"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        GenomeFile::load(&champion).unwrap().genes.id().to_string(),
        "3614c1b7608d779e"
    );

    // A folder without a table, holding a file of a champion's name: not evo's.
    let fresh = out.parent().unwrap().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let mine = fresh.join("b1-h8-l512-d64.toml");
    std::fs::write(&mine, "my notes\n").unwrap();
    let fresh_s = fresh.display().to_string();
    let o = evo(&["champions", SEARCH_NC, "--out", &fresh_s], &[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("b1-h8-l512-d64.toml: exists") && stderr(&o).contains("--force"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "my notes\n");
    assert!(!fresh.join(DISPATCH_FILE).exists());
    let o = evo(&["champions", SEARCH_NC, "--out", &fresh_s, "--force"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(GenomeFile::load(&mine).is_ok());
}
